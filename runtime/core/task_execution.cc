#include "core/task_execution.h"

#include <cxxabi.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <typeinfo>

#include "common/copy_in_pieces.h"
#include "core/owner.h"
#include "core/process_runtime.h"
#include "object/mapped_file.h"
#include "sray/internal/contained_refs.h"
#include "sray/internal/function_registry.h"

namespace sray::core {
namespace {

std::string Demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> readable(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && readable ? std::string(readable.get()) : std::string(name);
}

Result<std::unique_ptr<object::MappedFile>> MapArgument(const ArgumentSpec& argument,
                                                        StoreAccess& store) {
  Status last = Status::Ok();
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto path = store.MakeLocal(argument.id, argument.node, argument.size);
    if (!path.ok()) return path.status();
    auto file = object::MappedFile::OpenReadOnly(*path);
    if (file.ok()) return file;
    last = file.status();
  }
  return last;
}

}  // namespace

namespace {

using Body = std::function<std::string(const std::vector<std::string_view>& arguments)>;

// An actor call's argument lost where it was: its owner rebuilds it from
// lineage while the actor waits, so the actor's calls keep their order (a
// task is instead sent again by its owner). The caller is asked, since the
// actor may not know the owner: the caller owns the argument, or borrows it
// and asks its owner in turn. Where it is now; kFailed with the owner's
// reason when it cannot be rebuilt.
Result<ObjectStatus> RebuildLostArgument(const TaskSpec& spec, const ArgumentSpec& argument) {
  Owner* owner = ProcessRuntime();
  if (owner == nullptr) return Status::Unavailable("this process's runtime is gone");
  return owner->AskCallerToRebuild(argument, spec.owner_rank);
}

// Maps the arguments, runs `body`, and stores its result: the steps every
// kind of task shares. `seal`: kUntilSealed where the outcome does not go
// through the node manager (actors answer their callers directly).
TaskOutcome Run(const TaskSpec& spec, StoreAccess& store, std::uint32_t node_id, const Body& body,
                const std::function<std::string()>& missing, SealWait seal) {
  TaskOutcome outcome;
  outcome.task_id = spec.task_id;
  outcome.return_id = spec.return_id;
  outcome.owner_rank = spec.owner_rank;
  outcome.owner_node = spec.owner_node;
  outcome.function = DisplayName(spec);
  outcome.node = node_id;
  static const pid_t kPid = ::getpid();  // workers never fork
  outcome.pid = kPid;
  outcome.actor_id = spec.actor_id;
  outcome.incarnation = spec.incarnation;
  outcome.attempt = spec.attempt;
  auto fail = [&](OutcomeKind kind, std::string type, std::string message) {
    outcome.kind = static_cast<std::uint8_t>(kind);
    outcome.error_type = std::move(type);
    outcome.error_message = std::move(message);
    return outcome;
  };
  if (!body) return fail(OutcomeKind::kSystemError, "", missing());

  std::vector<std::unique_ptr<object::MappedFile>> mapped;
  std::vector<std::string> rebuilt_inline;  // small values rebuilt for an actor
  rebuilt_inline.reserve(spec.arguments.size());
  std::vector<std::string_view> arguments;
  arguments.reserve(spec.arguments.size());
  for (const auto& argument : spec.arguments) {
    if (!argument.by_reference) {
      arguments.emplace_back(argument.value);
      continue;
    }
    auto file = MapArgument(argument, store);
    // A task is sent again by its owner instead (kArgumentLost).
    if (!file.ok() && file.status().code() == StatusCode::kNotFound &&
        spec.kind != TaskKind::kFunction) {
      auto status = RebuildLostArgument(spec, argument);
      if (!status.ok()) {
        file = Status::NotFound(
            file.status().message() +
            "; it could not be rebuilt through its caller: " + status.status().message());
      } else {
        switch (static_cast<ObjectStatusKind>(status->kind)) {
          case ObjectStatusKind::kStored: {
            ArgumentSpec moved = argument;
            moved.node = status->node;
            moved.size = status->size;
            file = MapArgument(moved, store);
            break;
          }
          case ObjectStatusKind::kInline:
            rebuilt_inline.push_back(std::move(status->value));
            arguments.emplace_back(rebuilt_inline.back());
            continue;
          case ObjectStatusKind::kFailed:
            return fail(OutcomeKind::kObjectLost, "", status->failure.error_message);
          default:
            file =
                Status::NotFound(file.status().message() +
                                 "; asked to rebuild it, its caller or owner no longer knows it");
            break;
        }
      }
    }
    if (!file.ok()) {
      const bool lost = file.status().code() == StatusCode::kNotFound;
      // No room to restore it, here or on its holder, or to pull it here
      // (the message names the node): the caller gets ObjectStoreFullError,
      // as for a result that does not fit.
      const bool full = file.status().code() == StatusCode::kResourceExhausted;
      fail(lost   ? OutcomeKind::kArgumentLost
           : full ? OutcomeKind::kStoreFull
                  : OutcomeKind::kSystemError,
           "",
           "cannot read argument object " + argument.id.ToString() + " from node " +
               std::to_string(argument.node) + ": " + file.status().message());
      if (lost) outcome.size = arguments.size();  // its index: the values before it are mapped
      return outcome;
    }
    arguments.push_back((*file)->view());
    mapped.push_back(std::move(file).value());
  }
  if (!spec.visible_devices.empty())
    ::setenv("CUDA_VISIBLE_DEVICES", spec.visible_devices.c_str(), 1);

  std::string result;
  internal::ContainedRefs contained;
  try {
    const internal::ContainedRefsScope capture(&contained);
    result = body(arguments);
  } catch (const std::exception& error) {
    return fail(OutcomeKind::kTaskThrew, Demangle(typeid(error).name()), error.what());
  } catch (...) {
    return fail(OutcomeKind::kTaskThrew, "unknown", "a non-std::exception was thrown");
  }
  mapped.clear();
  if (!contained.empty()) {
    // The result holds references: its receiver must be a registered
    // borrower of each before this process may drop its own.
    Owner* owner = ProcessRuntime();
    if (owner == nullptr) {
      return fail(OutcomeKind::kSystemError, "",
                  "its result holds ObjectRefs, but the runtime is gone");
    }
    auto lent = owner->Lend(contained, spec.owner_rank);
    if (!lent.ok()) {
      return fail(
          OutcomeKind::kSystemError, "",
          "its result holds ObjectRefs that cannot be handed over: " + lent.status().message());
    }
    outcome.contained = std::move(lent).value();
  }

  if (result.size() <= store.inline_limit()) {
    outcome.kind = static_cast<std::uint8_t>(OutcomeKind::kInlineValue);
    outcome.value = std::move(result);
    return outcome;
  }
  auto path = store.Create(spec.return_id, result.size(), spec.incarnation);
  if (!path.ok()) {
    return fail(path.status().code() == StatusCode::kResourceExhausted ? OutcomeKind::kStoreFull
                                                                       : OutcomeKind::kSystemError,
                "",
                "cannot store its result of " + std::to_string(result.size()) +
                    " bytes: " + path.status().message());
  }
  auto file = object::MappedFile::Create(*path, result.size());
  if (!file.ok()) {
    store.Free(spec.return_id, node_id);
    return fail(OutcomeKind::kStoreFull, "", "cannot store its result: " + file.status().message());
  }
  CopyInPieces((*file)->data(), result.data(), result.size());
  file->reset();
  const Status sealed = store.Seal(spec.return_id, result.size(), spec.incarnation, seal);
  if (!sealed.ok()) {
    return fail(OutcomeKind::kSystemError, "", "cannot seal its result: " + sealed.message());
  }
  outcome.kind = static_cast<std::uint8_t>(OutcomeKind::kStoredValue);
  outcome.size = result.size();
  return outcome;
}

std::string NotRegistered(const std::string& what, const std::string& name) {
  return what + " '" + name + "' is not registered in the worker's executable: add SRAY_REMOTE(" +
         name + ") next to its definition";
}

}  // namespace

TaskOutcome ExecuteTask(const TaskSpec& spec, StoreAccess& store, std::uint32_t node_id) {
  const internal::Invoker* invoker = internal::FindInvoker(spec.function);
  return Run(
      spec, store, node_id, invoker != nullptr ? *invoker : Body(),
      [&] { return NotRegistered("function", spec.function); },
      SealWait::kBeforeNextManagerMessage);
}

TaskOutcome ConstructActor(const TaskSpec& spec, StoreAccess& store, std::uint32_t node_id,
                           internal::ActorInstance& instance) {
  const internal::ActorFactory* factory = internal::FindActorFactory(spec.function);
  Body body;
  if (factory != nullptr) {
    body = [&](const std::vector<std::string_view>& arguments) {
      instance = (*factory)(arguments);
      return internal::Serialize(msgpack::type::nil_t());
    };
  }
  return Run(
      spec, store, node_id, body, [&] { return NotRegistered("actor factory", spec.function); },
      SealWait::kUntilSealed);
}

TaskOutcome ExecuteActorCall(const TaskSpec& spec, StoreAccess& store, std::uint32_t node_id,
                             const internal::ActorInstance& instance) {
  const internal::MethodInvoker* method = internal::FindMethod(spec.function);
  Body body;
  if (method != nullptr) {
    body = [&](const std::vector<std::string_view>& arguments) {
      return (*method)(instance, arguments);
    };
  }
  return Run(
      spec, store, node_id, body,
      [&] { return NotRegistered("actor method", "&" + spec.function); }, SealWait::kUntilSealed);
}

}  // namespace sray::core
