def load(runs):
    return [r for r in runs]
