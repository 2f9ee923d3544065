"""bbagent's LLM side: CLI, loop, providers, prompt rendering, storage."""
