"""samebits.models: models over Hugging Face checkpoint directories: CausalLM (with its CausalLMState) and the
byte-level BPE Tokenizer."""

from .._causal_lm import CausalLM, CausalLMState
from ._tokenizer import Tokenizer, TokenStreamDecoder

__all__ = ["CausalLM", "CausalLMState", "Tokenizer", "TokenStreamDecoder"]
