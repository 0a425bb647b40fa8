"""DDP training with fastload, launched by torchrun: CPU with gloo, or GPUs with nccl.

    torchrun --standalone --nproc_per_node=2 examples/train_ddp.py --steps 20
    torchrun --standalone --nproc_per_node=2 examples/train_ddp.py --steps 40 --resume   # continues mid-epoch
    torchrun ... examples/train_ddp.py --loader torch                                    # the same with torch's

Without --data it trains on the built-in sample (generated once by rank 0).
The checkpoint holds the model, the optimizer, the step and the loader's
state_dict, so a resumed run sees exactly the batches the interrupted one
had still to see. With --loader torch the loader state is the epoch only
(torch's DataLoader cannot resume mid-epoch): the epoch is restarted.
"""

import argparse
import contextlib
import os
import time
import zlib

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel

import fastload
from fastload.recipes import resnet50_train
from fastload.sample_data import default_sample_root, make_sample_folder


def make_loader(kind: str, root: str, image_size: int, batch_size: int, workers: int, device: torch.device):
    transform = resnet50_train(size=image_size)
    if kind == "fastload":  # shards itself across ranks (rank and world from the process group)
        source = fastload.ImageFolder(root, transform, shuffle=True, drop_last=True)
        loader = fastload.DataLoader(source, batch_size=batch_size, num_workers=workers, drop_last=True,
                                     device=device if device.type == "cuda" else None)
        return loader, source.classes
    dataset = torchvision.datasets.ImageFolder(root, transform)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True, drop_last=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                                         drop_last=True, pin_memory=device.type == "cuda")
    return loader, dataset.classes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="an image folder (default: the built-in sample)")
    parser.add_argument("--loader", choices=["fastload", "torch"], default="fastload")
    parser.add_argument("--steps", type=int, default=20, help="train until this global step")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2, help="threads (fastload) or processes (torch) per rank")
    parser.add_argument("--checkpoint", default="ddp-checkpoint.pt")
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    root = args.data
    if root is None:
        root = str(default_sample_root())
        if rank == 0:
            make_sample_folder(root)
        dist.barrier()

    loader, classes = make_loader(args.loader, root, args.image_size, args.batch_size, args.workers, device)
    model = torchvision.models.resnet18(num_classes=len(classes)).to(device)
    model = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()

    step, epoch = 0, 0
    if args.resume:
        checkpoint = torch.load(args.checkpoint, map_location=device, weights_only=False)
        model.module.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        step, epoch = checkpoint["step"], checkpoint["epoch"]
        if args.loader == "fastload":
            loader.load_state_dict(checkpoint["loader"])  # the same on every rank: ranks step together
        if rank == 0:
            print(f"resumed at step {step} (epoch {epoch})", flush=True)

    def save() -> None:
        if rank == 0:
            state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                     "epoch": epoch, "loader": loader.state_dict() if args.loader == "fastload" else None}
            torch.save(state, args.checkpoint + ".tmp")
            os.replace(args.checkpoint + ".tmp", args.checkpoint)
        dist.barrier()

    started, seen = time.perf_counter(), 0
    while step < args.steps:
        if args.loader == "torch":
            loader.sampler.set_epoch(epoch)
        elif not args.resume or step != checkpoint["step"]:
            loader.set_epoch(epoch)  # after a resume, the loader's state says where to continue
        for images, labels in loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            with autocast:
                loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            seen += images.shape[0] * world
            if rank == 0:
                batch_id = zlib.crc32(str(labels.tolist()).encode())  # to compare runs batch by batch
                print(f"epoch {epoch} step {step:4d} loss {loss.item():.3f} batch {batch_id:08x} "
                      f"{seen / (time.perf_counter() - started):.0f} img/s", flush=True)
            if step % args.checkpoint_every == 0 or step == args.steps:
                save()
            if step == args.steps:
                break
        else:
            epoch += 1
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
