"""What the end-to-end tests stand on: mock model servers, a refusing proxy, client runners, an ACP client."""
