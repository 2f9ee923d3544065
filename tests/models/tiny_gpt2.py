"""Hugging Face transformers' GPT-2, tiny and randomly initialised, as a program in KernelBench's
format: two blocks of layer norm, eager attention (its causal mask a `where`) and a GELU (tanh) MLP
on Conv1D projections; the logits are the output."""
import torch
import torch.nn as nn
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB, BATCH, SEQ = 128, 2, 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=64, n_layer=2, n_head=4, bos_token_id=0,
                            eos_token_id=0, attn_implementation="eager")
        self.gpt2 = GPT2LMHeadModel(config)

    def forward(self, tokens):
        return self.gpt2(input_ids=tokens, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return []
