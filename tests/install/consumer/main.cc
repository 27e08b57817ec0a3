#include <iostream>

#include "sray/errors.h"
#include "sray/node.h"
#include "sray/version.h"

int main() {
  std::cout << "sray " << SRAY_VERSION_STRING << "\n";
  try {
    sray::CurrentNode();
  } catch (const sray::LaunchError& error) {
    std::cout << error.what() << "\n";
    return 0;
  }
  return 1;
}
