"""Authentication and authorisation: users, cookie sessions, API tokens, node tokens, scopes."""
