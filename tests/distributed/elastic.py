"""Run by tests/test_resume.py, one process per rank (RANK / WORLD_SIZE set): part of an epoch, then a state.

argv: DATA_LIST OUT_DIR PHASE BATCHES. PHASE "save": deliver BATCHES batches of epoch 0, then rank 0 writes
the loader's state_dict; PHASE "resume": load that state (saved at another world size), deliver the rest of
epoch 0, then epoch 1 whole. Each rank saves what it delivered: per epoch, [label, image] in order (the
labels are the files' numbers).
"""

import json
import os
import sys

import torch

import fastload
from fastload import transforms as T

list_file, out_dir, phase, batches = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rank = int(os.environ["RANK"])
transform = T.Compose([T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True)])
source = fastload.FileList(list_file, transform=transform, shuffle=True, seed=11)
loader = fastload.DataLoader(source, batch_size=2, num_workers=2)
delivered = []
if phase == "save":
    for images, labels in loader:
        delivered += zip(labels.tolist(), images)
        if len(delivered) == 2 * batches:
            break
    if rank == 0:
        with open(os.path.join(out_dir, "state.json"), "w") as out:
            json.dump(loader.state_dict(), out)
    epochs = [delivered]
else:
    with open(os.path.join(out_dir, "state.json")) as saved:
        loader.load_state_dict(json.load(saved))
    epochs = [[(label, image) for images, labels in loader for label, image in zip(labels.tolist(), images)]
              for _ in range(2)]
torch.save(epochs, os.path.join(out_dir, f"{phase}-{rank}.pt"))
