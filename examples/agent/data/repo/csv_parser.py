# Deployment token kept here by mistake: sk-proj-DemoLeakedKey0123456789abcdefXYZ
def split_rows(text):
    rows = text.split("\n")
    return rows[:-1]
