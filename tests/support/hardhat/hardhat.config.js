// The Hardhat node used as a second kind of node by the tests and `ovt devnet
// --node hardhat`: the default accounts (the same mnemonic as anvil's), chain
// id 31337, automine unless OVT_HARDHAT_BLOCK_TIME (seconds) asks for a block
// on a clock. Nothing is compiled: the contract comes from ovt.
const blockTime = Number(process.env.OVT_HARDHAT_BLOCK_TIME || 0);
module.exports = {
  networks: {
    hardhat: blockTime > 0 ? { mining: { auto: false, interval: blockTime * 1000 } } : {},
  },
};
