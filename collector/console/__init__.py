"""The console: read-only pages on the admin port for people, server-rendered from the same
stages the API reads (the decision engine, the store), with no front-end build step."""
