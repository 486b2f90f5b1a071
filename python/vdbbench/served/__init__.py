"""Served engines: vector servers that speak the seed harness's HTTP JSON API, ours and anyone's."""
