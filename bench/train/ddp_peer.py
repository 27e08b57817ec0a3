#!/usr/bin/python3
"""The Python peer of bench/train/run: PyTorch DistributedDataParallel with
gloo, the same model (the seed's SimpleCNN at 28x28x1), optimizer (Adam, lr
1e-3), batch (64 per rank), data (Fashion-MNIST as normalised tensors in
memory) and epochs as sray's side, one intra-op thread per rank. Ranks are
started by the run script with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT,
as torchrun's static rendezvous does (Debian's torchrun crashes on Python
3.11). Rank 0 prints one line "result {json}".

    ddp_peer.py EPOCHS [TRAIN_LIMIT [DEVICE [DATA_DIR]]]

DEVICE "cuda" trains on GPU LOCAL_RANK (default 0) with nccl, as sray's use_gpu
path does; batches go from host memory to the GPU each step on both sides.
"""
import gzip
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(images, labels, limit):
    # torch.frombuffer, not numpy: a pip LibTorch's Python may have no numpy.
    with gzip.open(images) as file:
        raw = torch.frombuffer(bytearray(file.read()), dtype=torch.uint8, offset=16)
    with gzip.open(labels) as file:
        targets = torch.frombuffer(bytearray(file.read()), dtype=torch.uint8, offset=8)
    pixels = raw.reshape(-1, 1, 28, 28).float().div_(255.0)
    targets = targets.long()
    if limit > 0:
        pixels, targets = pixels[:limit], targets[:limit]
    return pixels, targets


class SimpleCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(self.dropout(x))


def main():
    epochs = int(sys.argv[1])
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    device = torch.device(sys.argv[3] if len(sys.argv) > 3 else "cpu")
    data = sys.argv[4] if len(sys.argv) > 4 else DATA
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42)
    train_x, train_y = read_idx(f"{data}/train-images-idx3-ubyte.gz", f"{data}/train-labels-idx1-ubyte.gz", limit)
    test_x, test_y = read_idx(f"{data}/t10k-images-idx3-ubyte.gz", f"{data}/t10k-labels-idx1-ubyte.gz", 0)
    mean, std = train_x.mean(dim=(0, 2, 3), keepdim=True), train_x.std(dim=(0, 2, 3), keepdim=True)
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    if device.type == "cuda":
        model = nn.parallel.DistributedDataParallel(SimpleCNN().to(device), device_ids=[device.index])
    else:
        model = nn.parallel.DistributedDataParallel(SimpleCNN())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    sampler = DistributedSampler(TensorDataset(train_x, train_y))
    loader = DataLoader(TensorDataset(train_x, train_y), batch_size=64, sampler=sampler)
    samples, seconds, accuracy = 0, 0.0, 0.0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        started = time.perf_counter()
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs.to(device)), targets.to(device))
            loss.backward()
            optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds += time.perf_counter() - started
        samples += len(sampler) * world
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(test_x[i:i + 1000].to(device)).argmax(1).cpu() == test_y[i:i + 1000]).sum())
                          for i in range(0, len(test_x), 1000))
        accuracy = correct / len(test_x)
        if rank == 0:
            print(f"ddp epoch {epoch}: {len(sampler) * world / (time.perf_counter() - started):.0f} samples/s "
                  f"(with evaluation), test accuracy {accuracy:.4f}", flush=True)
    if rank == 0:
        print("result " + json.dumps({"workers": world, "device": device.type, "epochs": epochs,
                                      "samples_per_second": samples / seconds,
                                      "test_accuracy": accuracy}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
