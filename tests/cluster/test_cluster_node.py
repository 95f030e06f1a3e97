"""Where the other nodes reach a node (the address the job's rendezvous moves to when its
host is lost): the rule, on this machine's own routes."""

from __future__ import annotations

import socket

from soak.cluster.node import endpoint, node_address


def test_rank_0_is_reached_at_the_rendezvous_host_the_plan_names() -> None:
    assert node_address(None, "node-a01:29400", 0) == "node-a01"
    assert node_address(None, "[fd00::1]:29400", 0) == "fd00::1"


def test_another_rank_is_reached_at_its_route_to_the_rendezvous_host() -> None:
    # on loopback the route to 127.0.0.1 leaves from 127.0.0.1; across hosts, from the NIC
    # the nodes share (the netns test's node 1: its veth address)
    assert node_address(None, "127.0.0.1:29400", 1) == "127.0.0.1"
    assert node_address(None, "127.0.0.1:29400", 3) == "127.0.0.1"


def test_an_advertised_address_wins_and_an_unresolvable_host_leaves_the_host_name() -> None:
    assert node_address("10.0.0.7", "127.0.0.1:29400", 2) == "10.0.0.7"
    assert node_address("10.0.0.7", "node-a01:29400", 0) == "10.0.0.7"
    assert node_address(None, "no-such-host.invalid:29400", 1) == socket.gethostname()


def test_an_ipv6_endpoint_is_bracketed_as_torchrun_reads_it() -> None:
    assert endpoint("fd00::2", 29400) == "[fd00::2]:29400"
    assert endpoint("10.0.0.2", "29400") == "10.0.0.2:29400"
