// Links sray::train from the installed package; outside a training worker
// GetContext says so with sray::Error.
#include <iostream>

#include <sray/train.h>

int main() {
  sray::train::ScalingConfig scaling;
  scaling.num_workers = 2;
  try {
    sray::train::GetContext();
  } catch (const sray::Error& error) {
    std::cout << error.what() << "\n";
    return scaling.num_workers == 2 ? 0 : 1;
  }
  return 1;
}
