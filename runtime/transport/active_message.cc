#include "transport/active_message.h"

namespace sray::transport {

ucs_status_ptr_t SendActiveMessage(ucp_ep_h endpoint, const ActiveMessageSend& send) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = send.on_complete;
  param.user_data = send.user_data;
  if (send.reply_endpoint_wanted) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_REPLY;
  }
  return ucp_am_send_nbx(endpoint, kActiveMessageId, send.header.data(), send.header.size(),
                         send.payload.data(), send.payload.size(), &param);
}

}  // namespace sray::transport
