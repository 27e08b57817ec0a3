// Fashion-MNIST with the seed's SimpleCNN, data-parallel over the step's
// nodes:   sray run -N2 train_fashion_mnist --workers 2 --epochs 1
//          srun -N2 --ray-cluster train_fashion_mnist --workers 2 --spread
// Data: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).

#include "train_main.h"

int main(int argc, char** argv) {
  return sray::examples::RunImageTrainingMain(argc, argv, "fashion_mnist", "/usr/share/datasets/fashion-mnist");
}
