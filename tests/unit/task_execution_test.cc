// How a task's failure to reach its inputs is reported (core/task_execution).
#include "core/task_execution.h"

#include <gtest/gtest.h>

#include <string>

#include "no_store.h"
#include "sray/internal/function_registry.h"

namespace task_execution_test {
int Echo(int value) {
  return value;
}
}  // namespace task_execution_test
SRAY_REMOTE(task_execution_test::Echo);

namespace sray::core {
namespace {

// A store whose MakeLocal fails with `failure`.
class StoreFailingMakeLocal : public NoStore {
 public:
  explicit StoreFailingMakeLocal(Status failure) : failure_(std::move(failure)) {}
  Result<std::string> MakeLocal(const ObjectId&, std::uint32_t, std::uint64_t) override {
    return failure_;
  }

 private:
  Status failure_;
};

TaskSpec EchoOfAStoredArgument() {
  TaskSpec spec;
  spec.function = "task_execution_test::Echo";
  ArgumentSpec argument;
  argument.by_reference = true;
  argument.id = ObjectId{2, 7};
  argument.node = 1;
  argument.size = 1 << 20;
  spec.arguments.push_back(argument);
  return spec;
}

// Before: an argument that could not be restored or pulled for lack of room
// failed the task as a system error, which reached the caller as a plain
// sray::Error instead of ObjectStoreFullError.
TEST(TaskExecution, AnArgumentWithNoRoomOnTheNodeIsAFullStore) {
  StoreFailingMakeLocal store(Status::ResourceExhausted(
      "object 2.7 of 1048576 bytes does not fit the object store of node 0"));
  const TaskOutcome outcome = ExecuteTask(EchoOfAStoredArgument(), store, 0);
  EXPECT_EQ(outcome.kind, static_cast<std::uint8_t>(OutcomeKind::kStoreFull));
  EXPECT_NE(outcome.error_message.find("cannot read argument object"), std::string::npos)
      << outcome.error_message;
  EXPECT_NE(outcome.error_message.find("does not fit the object store of node 0"),
            std::string::npos)
      << outcome.error_message;
}

TEST(TaskExecution, AnArgumentThatCannotBeReadForAnotherReasonIsASystemError) {
  StoreFailingMakeLocal store(Status::IoError("cannot restore spilled object 2.7: EIO"));
  const TaskOutcome outcome = ExecuteTask(EchoOfAStoredArgument(), store, 0);
  EXPECT_EQ(outcome.kind, static_cast<std::uint8_t>(OutcomeKind::kSystemError));
  EXPECT_NE(outcome.error_message.find("EIO"), std::string::npos) << outcome.error_message;
}

}  // namespace
}  // namespace sray::core
