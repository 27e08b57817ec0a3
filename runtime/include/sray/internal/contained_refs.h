#pragma once

// ObjectRefs packed inside a value (a std::vector<ObjectRef<T>>, a struct
// holding one) travel as references, not values. Whoever packs such a value
// must keep those objects alive until the value's receiver holds references
// of its own, so packing records each reference it writes in the innermost
// ContainedRefsScope on the packing thread; the code that sends the value
// (task arguments, Put, a task's result) takes them from there.
//
// Thread-safety: a scope belongs to the thread that opened it.

#include <memory>
#include <vector>

#include "sray/internal/runtime.h"

namespace sray::internal {

using ContainedRefs = std::vector<std::shared_ptr<ObjectHandle>>;

class ContainedRefsScope {
 public:
  // Null records nothing (a pass that only counts bytes).
  explicit ContainedRefsScope(ContainedRefs* into) : previous_(current_) { current_ = into; }
  ~ContainedRefsScope() { current_ = previous_; }
  ContainedRefsScope(const ContainedRefsScope&) = delete;
  ContainedRefsScope& operator=(const ContainedRefsScope&) = delete;

  static void Record(const std::shared_ptr<ObjectHandle>& handle) {
    if (current_ != nullptr) current_->push_back(handle);
  }

 private:
  static inline thread_local ContainedRefs* current_ = nullptr;
  ContainedRefs* previous_;
};

}  // namespace sray::internal
