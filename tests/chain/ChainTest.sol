// SPDX-License-Identifier: MIT
// A tiny contract for the chain/ suites: it emits an event and has functions
// that revert with a reason string and with a custom error.
pragma solidity ^0.8.28;

contract ChainTest {
    event Stored(address indexed who, uint64 indexed seq, bytes32 value, bytes note);

    error WrongValue(uint64 got);

    uint64 public seq;

    function store(bytes32 value, bytes calldata note) external {
        seq += 1;
        emit Stored(msg.sender, seq, value, note);
    }

    function fail(uint64 x) external pure {
        if (x == 0) revert("x must not be zero");
        revert WrongValue(x);
    }

    // Reverts only when seq is odd: passes eth_call against one state and
    // reverts once another transaction changed it.
    function storeIfEven() external {
        require(seq % 2 == 0, "seq is odd");
        seq += 1;
    }
}
