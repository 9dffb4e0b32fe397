"""Sessions: runs of one conversation grouped, and the rules over them."""
