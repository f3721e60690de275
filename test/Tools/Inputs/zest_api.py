# zest.train from a script: the model as Python objects (no factory file),
# trained on 2 ranks; the state dict it returns loads strictly.
import os
import sys

import zest

inputs = os.path.join(os.path.dirname(__file__), "..", "..", "Import", "Inputs")
sys.path.insert(0, inputs)
from hf import llama  # noqa: E402

cache, save = sys.argv[1], sys.argv[2]
model, loss_fn, batch = llama()
state, losses = zest.train(
    model,
    loss_fn,
    batch,
    nproc=2,
    steps=4,
    lr=0.1,
    save=save,
    cache_dir=cache,
    zestc_args=["--leaf-classes=LlamaDecoderLayer"],
)
model.load_state_dict(state, strict=True)
print(f"api: {len(state)} tensors, losses at steps {sorted(losses)}")
try:
    zest.train(model, loss_fn, batch, nproc=2, learning_rate=0.1)
except zest.LaunchError as error:
    print(f"api error: {error}")
