"""Human review: queues of REVIEW results, reviewers' claims, and their labels as verdicts."""
