"""Run by tests/test_frameworks.py: a Lightning Trainer (DDP, 2 CPU processes) fed by a fastload loader.

argv: LIST OUT_DIR. Lightning's "ddp" strategy starts the second process by
running this script again. Each rank records the labels (= file numbers) of
every training step per epoch.
"""

import json
import os
import sys

import lightning as L
import torch

import fastload
from fastload import transforms as T

list_file, out_dir = sys.argv[1:3]


class Probe(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(3 * 8 * 8, 1)
        self.seen: dict[int, list[int]] = {}

    def training_step(self, batch, batch_index):
        images, labels = batch
        assert images.shape[1:] == (3, 8, 8) and images.dtype == torch.float32
        self.seen.setdefault(self.current_epoch, []).extend(labels.tolist())
        return self.layer(images.flatten(1)).square().mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


transform = T.Compose([T.RandomResizedCrop(8), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True)])
loader = fastload.DataLoader(fastload.FileList(list_file, transform=transform, shuffle=True, seed=2),
                             batch_size=2, num_workers=2)
model = Probe()
trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
trainer.fit(model, loader)
assert loader.fast_path
with open(os.path.join(out_dir, f"lightning-{trainer.global_rank}.json"), "w") as out:
    json.dump({"seen": {str(k): v for k, v in model.seen.items()}, "world": trainer.world_size}, out)
