"""Train a small torchvision model on the built-in sample with fastload (CPU is enough).

    .venv/bin/python examples/train_cpu.py --steps 20

The only fastload-specific line is the DataLoader; swap in torch.utils.data.DataLoader
with --loader torch to compare.
"""

import argparse
import time

import torch
import torchvision

import fastload
from fastload import transforms as T
from fastload.sample_data import default_sample_root, make_sample_folder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--loader", choices=["fastload", "torch"], default="fastload")
    args = parser.parse_args()
    root = make_sample_folder(default_sample_root())
    transform = T.Compose([T.RandomResizedCrop(128), T.RandomHorizontalFlip(),
                           T.ToDtype(torch.float32, scale=True),
                           T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    dataset = torchvision.datasets.ImageFolder(root, transform)
    loader_class = fastload.DataLoader if args.loader == "fastload" else torch.utils.data.DataLoader
    loader = loader_class(dataset, batch_size=args.batch_size, shuffle=True, num_workers=2, drop_last=True)
    model = torchvision.models.resnet18(num_classes=len(dataset.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    started, step = time.perf_counter(), 0
    while step < args.steps:
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            print(f"step {step:4d}  loss {loss.item():.3f}  "
                  f"{step * args.batch_size / (time.perf_counter() - started):.0f} img/s")
            if step == args.steps:
                break


if __name__ == "__main__":
    main()
