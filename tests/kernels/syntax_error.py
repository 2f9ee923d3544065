"""Does not parse."""
def kernel(self)
    return self
