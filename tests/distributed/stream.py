"""Run by tests under torchrun (gloo): streams tar shards from a URL pattern and writes what this rank got.

argv: URLS OUT_DIR CACHE_DIR STORAGE_OPTIONS_JSON. Two epochs of TarShards in its default mode for remote
shards (streaming), batch 2; the ranks check with all_gather that they ran the same number of batches.
"""

import json
import os
import sys

import torch
import torch.distributed as dist

import fastload
from fastload import transforms as T

urls, out_dir, cache_dir, storage_options = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
source = fastload.TarShards(urls, T.Compose([T.RandomResizedCrop(8), T.ToDtype(torch.float32, scale=True)]),
                            cache_dir=cache_dir, shuffle=True, seed=5, shuffle_buffer=4,
                            **({"storage_options": storage_options} if storage_options else {}))
loader = fastload.DataLoader(source, batch_size=2, num_workers=2)
epochs = []
for epoch in range(2):
    loader.set_epoch(epoch)
    epochs.append([label for _, labels in loader for label in labels.tolist()])
counts = [None] * world
dist.all_gather_object(counts, [len(labels) for labels in epochs])
assert all(c == counts[0] for c in counts), f"unequal batch counts across ranks: {counts}"
with open(os.path.join(out_dir, f"stream-{rank}.json"), "w") as out:
    json.dump({"mode": source.mode, "epochs": epochs, "fetched": source.cache.fetched}, out)
dist.destroy_process_group()
