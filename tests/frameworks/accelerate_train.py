"""Run by tests/test_frameworks.py under torchrun: Hugging Face Accelerate with a fastload loader.

argv: LIST OUT_DIR MODE STATE_DIR. MODE "full" trains one epoch; "save" trains
3 steps, saves with accelerator.save_state and stops; "resume" loads that
state and trains to the end of the epoch. Each records the labels (= file
numbers) it trained on, and checks that prepare() kept fastload's loader.
"""

import json
import os
import sys

import torch
from accelerate import Accelerator

import fastload
from fastload import transforms as T

list_file, out_dir, mode, state_dir = sys.argv[1:5]
accelerator = Accelerator(cpu=True)
transform = T.Compose([T.RandomResizedCrop(8), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True)])
loader = fastload.DataLoader(fastload.FileList(list_file, transform=transform, shuffle=True, seed=1),
                             batch_size=2, num_workers=2, device=accelerator.device)
model = torch.nn.Linear(3 * 8 * 8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer, prepared = accelerator.prepare(model, optimizer, loader)
assert prepared is loader and loader.fast_path, "prepare() must return fastload's loader itself"
if mode == "resume":
    accelerator.load_state(state_dir)
seen = []
for step, (images, labels) in enumerate(loader):
    loss = model(images.flatten(1)).square().mean()
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    seen.extend(labels.tolist())
    if mode == "save" and step == 2:
        accelerator.save_state(state_dir)
        break
with open(os.path.join(out_dir, f"accelerate-{mode}-{accelerator.process_index}.json"), "w") as out:
    json.dump({"seen": seen, "world": accelerator.num_processes}, out)
# Both ranks reach the barrier before either tears gloo down: a rank that destroys the group while its peer
# is still in a collective can abort in gloo's teardown ("terminate called without an active exception",
# SIGABRT at exit, seen once in 30+ runs without it).
accelerator.wait_for_everyone()
accelerator.end_training()
