#pragma once

// A reference to an object in the job: the future result of a task, or a
// value given to Put. Copies share one counted reference; the object is freed
// when the last copy anywhere in the job is gone and no task still needs it.
// Passing an ObjectRef to a task hands over the value without copying it
// through the caller. Inside a value (a std::vector<ObjectRef<T>>, a struct
// with MSGPACK_DEFINE) it travels as a reference: the receiver gets a
// reference of its own, counted by the object's owner, and the object stays
// alive while any process holds one.

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <msgpack.hpp>

#include "sray/errors.h"
#include "sray/internal/contained_refs.h"
#include "sray/internal/runtime.h"

namespace sray {

template <typename T>
class ObjectRef {
 public:
  using value_type = T;
  ObjectRef() = default;
  explicit ObjectRef(std::shared_ptr<internal::ObjectHandle> handle) : handle_(std::move(handle)) {}

  [[nodiscard]] bool valid() const { return handle_ != nullptr; }
  // Both throw EmptyObjectRefError when !valid().
  [[nodiscard]] const internal::ObjectId& id() const { return checked_handle()->id(); }
  [[nodiscard]] const std::shared_ptr<internal::ObjectHandle>& checked_handle() const {
    if (!handle_) {
      throw EmptyObjectRefError(
          "sray: this ObjectRef is empty (default-constructed or moved from): give it the result "
          "of Put, of Task(...).Remote() or of an actor call before using it");
    }
    return handle_;
  }
  // May be null.
  [[nodiscard]] const std::shared_ptr<internal::ObjectHandle>& handle() const { return handle_; }

 private:
  std::shared_ptr<internal::ObjectHandle> handle_;
};

template <typename T>
struct IsObjectRef : std::false_type {};
template <typename T>
struct IsObjectRef<ObjectRef<T>> : std::true_type {};

}  // namespace sray

// The wire form of an ObjectRef inside a value: nil when empty, else
// [owner rank, index, owner's transport address]. The address lets any
// process reach the owner, whoever passed the reference on.
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <typename T>
  struct pack<sray::ObjectRef<T>> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& out, const sray::ObjectRef<T>& ref) const {
      if (!ref.valid()) return out.pack_nil();
      sray::internal::ContainedRefsScope::Record(ref.handle());
      const sray::internal::ObjectId& id = ref.id();
      const std::string address = sray::internal::CurrentRuntime().OwnerAddress(id);
      out.pack_array(3);
      out.pack(id.owner);
      out.pack(id.index);
      out.pack_bin(static_cast<std::uint32_t>(address.size()));
      out.pack_bin_body(address.data(), static_cast<std::uint32_t>(address.size()));
      return out;
    }
  };

  template <typename T>
  struct convert<sray::ObjectRef<T>> {
    const msgpack::object& operator()(const msgpack::object& in, sray::ObjectRef<T>& ref) const {
      if (in.type == msgpack::type::NIL) {
        ref = sray::ObjectRef<T>();
        return in;
      }
      if (in.type != msgpack::type::ARRAY || in.via.array.size != 3 ||
          in.via.array.ptr[2].type != msgpack::type::BIN) {
        throw msgpack::type_error();
      }
      const sray::internal::ObjectId id{in.via.array.ptr[0].as<std::uint64_t>(),
                                        in.via.array.ptr[1].as<std::uint64_t>()};
      const msgpack::object_bin& address = in.via.array.ptr[2].via.bin;
      ref = sray::ObjectRef<T>(sray::internal::CurrentRuntime().Borrow(
          id, std::string_view(address.ptr, address.size)));
      return in;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
