"""Process-level pieces that know nothing of llmload: exit codes, child processes, cores, gc, argparse."""
