"""Helpers shared by the tests: builders, servers, agent runs, the CLI runner; no test module
imports another, and every helper two test modules need lives here."""
