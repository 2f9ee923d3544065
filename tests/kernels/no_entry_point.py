"""Defines no function named kernel."""


def relu(self):
    return self
