"""Run by tests/test_distributed.py under torchrun (or with RANK/WORLD_SIZE set): writes what this rank got.

argv: DATA_LIST OUT_DIR MODE, MODE = "dist" (init a gloo group), "env" (torchrun's
environment only) or "args" (rank/world_size passed explicitly).
For every configuration it records the labels (= file numbers) delivered per
epoch, and, with a process group, checks that all ranks have the same batch count.
"""

import json
import os
import sys

import torch
import torch.distributed as dist

import fastload
from fastload import transforms as T

list_file, out_dir, mode = sys.argv[1:4]
if mode == "dist":
    dist.init_process_group("gloo")
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
explicit = {"rank": rank, "world_size": world} if mode == "args" else {}
if mode == "args":  # the environment must not be what decides
    os.environ["RANK"], os.environ["WORLD_SIZE"] = "0", "1"

transform = T.Compose([T.RandomResizedCrop(8), T.ToDtype(torch.float32, scale=True)])
results = {}
for size in (10, 11, 12):
    for drop_last in (False, True):
        for even in (True, False):
            source = fastload.FileList(list_file, transform=transform, shuffle=True, seed=3,
                                       drop_last=drop_last, even_shards=even, **explicit)
            source.samples = source.samples[:size]
            loader = fastload.DataLoader(source, batch_size=2, num_workers=2, drop_last=drop_last, **explicit)
            epochs = []
            for epoch in range(2):
                loader.set_epoch(epoch)
                epochs.append([label for _, labels in loader for label in labels.tolist()])
            key = f"{size}-{int(drop_last)}-{int(even)}"
            results[key] = {"epochs": epochs, "len": len(loader), "batches": [len(e) for e in epochs]}
            if mode == "dist" and even:
                counts = [None] * world
                dist.all_gather_object(counts, len(loader))
                assert len(set(counts)) == 1, f"{key}: unequal batch counts across ranks {counts}"
with open(os.path.join(out_dir, f"{mode}-{rank}.json"), "w") as out:
    json.dump({"rank": rank, "world": world, "local_rank": os.environ.get("LOCAL_RANK"), "results": results},
              out)
if mode == "dist":
    dist.destroy_process_group()
