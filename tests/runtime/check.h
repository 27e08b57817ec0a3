#pragma once

// What the job-wide checks (tasks_check, actors_check) print: "ok: <what>"
// lines that the test scripts count, or "FAIL: <what>" and exit status 1.

#include <cstdlib>
#include <iostream>
#include <string>

namespace sray::check {

[[noreturn]] inline void Fail(const std::string& what) {
  std::cout << "FAIL: " << what << std::endl;
  std::exit(1);
}

inline void Expect(bool condition, const std::string& what) {
  if (!condition) Fail(what);
  std::cout << "ok: " << what << std::endl;
}

}  // namespace sray::check
