#pragma once

// A reference to an object in the job: the future result of a task, or a
// value given to Put. Copies share one counted reference; the object is freed
// when the last copy anywhere in the job is gone and no task still needs it.
// Passing an ObjectRef to a task hands over the value without copying it
// through the caller.

#include <memory>
#include <utility>

#include "sray/errors.h"
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
