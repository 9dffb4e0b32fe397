"""Named datasets: stored runs kept as cases with the outcome a pack must give them."""
