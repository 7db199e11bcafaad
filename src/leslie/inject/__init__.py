"""When an agent is told: the pure injection policy, the injector the hooks call, the block, watch."""
