"""What a stand-in for the agent loop tells a batch (as ``agent.generate.start`` does first)."""
from bbagent.agent.generate.progress import Started


def run_started(op: str, run_dir) -> Started:
    return Started(op=op, computation=op, serves=[op], provider="fake", model="fake", rounds=1, candidates=1,
                   run_dir=str(run_dir))
