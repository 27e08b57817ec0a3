// CIFAR-10 (binary version: data_batch_1.bin ... test_batch.bin) with the
// seed's own SimpleCNN:   sray run -N2 train_cifar10 --data DIR --workers 2

#include "train_main.h"

int main(int argc, char** argv) { return sray::examples::RunImageTrainingMain(argc, argv, "cifar10", "."); }
