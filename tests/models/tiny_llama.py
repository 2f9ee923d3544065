"""Hugging Face transformers' Llama, tiny and randomly initialised, as a program in KernelBench's
format (how a user hands ``bbagent check-model --script`` a real architecture): two decoder layers
with grouped KV heads, RMSNorm, RoPE and a SwiGLU MLP; the logits are the output."""
import torch
import torch.nn as nn
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB, BATCH, SEQ = 128, 2, 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                             hidden_act="silu", attn_implementation="eager")
        self.llama = LlamaForCausalLM(config)

    def forward(self, tokens):
        return self.llama(input_ids=tokens, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return []
