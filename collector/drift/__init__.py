"""Window rules over the store: drift against a baseline, canaries, and reliability (pass@k)."""
