// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {OvtArbitration} from "./OvtArbitration.sol";

/// @title ovt narrowing: levels 2 to 4 of a dispute, after the step game.
/// @notice Once OvtArbitration has fixed step K of a game and both leaves are
/// revealed (AwaitingVerdict), the two parties narrow the step to one site of
/// its trace (level 2), to one 64 KiB leaf of that site's output tree
/// (level 3) and, for a site that sums over the batch, to one 128-row chunk
/// of that leaf's canonical chunk chain (level 4), so the arbiter
/// re-executes one block instead of the step. The
/// game, its binding to the committed leaves and its argument are in
/// docs/contract.md ("Narrowing a step"); trees are SHA-256 tensor trees
/// (common/tree.h): leaf SHA-256(0x00 || piece), node SHA-256(0x01 || l || r),
/// an odd last node moves up unchanged. This contract holds no funds: its end
/// state (getNarrow, the Narrowed and Lost events) is what the arbiter reads.
contract OvtNarrow {
    // ---------------------------------------------------------------- types

    enum Phase {
        None,       // no narrowing of this game
        Posting,    // waiting for the two trace commitments
        Descending, // a bisection over a tree, one level per round
        Revealing,  // both reveal the item (record or state entry) at the leaf found
        Ended       // final: see outcome
    }

    enum Stage {
        None,
        Trace,  // level 2: the trace's record hashes, one leaf per site
        States, // level 2 when the traces agree: the first state K tensor root that differs
        Output, // level 3: the output tree of the site (or state tensor) found
        Chunks,  // level 4: the chunk chain of a batch reduction's output leaf (a chunk op's site)
        Elements // level 4: the elements of a one-value-per-row op's output leaf (an element op's site)
    }

    enum Outcome {
        None,
        Narrowed,     // one block found: the arbiter re-executes it
        ItemsDiffer,  // the records (or entries) differ apart from the output root: the arbiter rules on them
        CountsDiffer, // the two traces have different site counts
        InputsDiffer, // the leaves disagree on batchHash or logHash: the step's own verdict applies
        TrainerLost,  // the trainer missed a deadline or posted a move its commitments contradict
        AuditorLost,
        BothSilent,   // neither moved in time
        ElementsAgree // level 4: both posted the same element root: the arbiter rules from the block packages
    }

    enum Reason {
        None,
        Timeout,      // missed the deadline
        BadLeaf,      // the posted preimage does not hash to the party's leaf K
        BadPrevious,  // the previous roots do not combine to the agreed stateHash K-1
        BadRoots,     // the state K roots do not combine to the party's stateHash K, or have the wrong count
        BadTrace,     // a trace of no sites
        BadChildren,  // the children do not hash to the party's node
        BadItem,      // the revealed record or entry does not hash to the party's leaf, or is malformed
        BadChain      // a chunk chain of under 2 leaves, or whose proof does not end in the party's level-3 leaf
    }

    struct Side {
        bytes32 stateHash;  // the party's stateHash K
        bytes32 traceRoot;
        bytes32 statesHash; // keccak256 of its state K roots and the tensor sizes (abi.encodePacked)
        bytes32 node;       // current node of the descent; the leaf once found
        bytes32 header;     // keccak256 of the revealed item with its root zeroed
        bytes32 claim;      // the revealed item's output root
        uint64 sites;
        uint64 elements;    // the revealed item's output elements
        bytes32 blockLeaf;  // level 4: the party's level-3 leaf (the block's output leaf hash)
        bytes32 chainRoot;  // level 4: its chunk chain's root, or its element tree's root (stage Elements)
        uint64 chunks;      // level 4: its chain's leaf count (chunks + 1)
    }

    struct Game {
        address trainer;
        uint64 deadline;
        Phase phase;
        Stage stage;
        Outcome outcome;
        uint8 moved;        // bit 0 trainer, bit 1 auditor (this round)
        address auditor;
        uint32 moveTimeout;
        uint32 round;
        uint32 prevCount;   // 3 * ntensors, from the agreed previous roots (0: not posted yet)
        address lastMover;
        uint64 step;        // K
        uint8 level;        // height of the current node above the leaves
        uint64 count;       // leaves of the tree being bisected
        uint64 index;       // node index at `level`; the leaf once found
        Stage itemStage;    // Trace or States: what `item` indexes
        uint64 item;        // the site (Trace) or state root (States: section * ntensors + tensor) found
        uint64 blockIndex;  // the output leaf found at level 3
        uint64 chunk;       // the leaf found at level 4: chunk c (or C: the final step), or element e
        bytes32 op;         // the record's op name (first 32 bytes), zero for a state entry
        bytes32 configHash;
        bytes32 previousState;
        bytes32 batchHash;
        bytes32 logHash;
        bytes32 trainerLeaf; // the step game's leaves K
        bytes32 auditorLeaf;
        bytes32 treeId;      // the id the leaves are hashed with (a challenge: its run's)
        bytes32 pendingLeft; // the first mover's children this round
        bytes32 pendingRight;
        Side t;
        Side a;
    }

    struct LeafPreimage {
        bytes32 stateHash;
        bytes32 batchHash;
        bytes32 logHash;
    }

    uint8 private constant TRAINER = 1;
    uint8 private constant AUDITOR = 2;
    uint256 private constant LEAF_BYTES = 65536;
    uint64 public constant NO_BLOCK = type(uint64).max;
    // The ops whose sites sum over the batch: their level-3 leaf goes on to level 4 (isChunkOp, docs/contract.md).
    bytes32 public constant OP_DWEIGHT = "matmul.bwd.dweight";
    bytes32 public constant OP_DBIAS = "matmul.bwd.dbias";
    bytes32 public constant OP_BIAS_BWD = "bias.bwd";
    bytes32 private constant OP_CONV_DWEIGHT = "conv.bwd.dweight";
    bytes32 private constant OP_GRADNORM_SUMSQ = "gradnorm.sumsq";
    bytes32 private constant OP_LN_DBIAS = "layernorm.bwd.dbias";
    bytes32 private constant OP_LN_DWEIGHT = "layernorm.bwd.dweight";
    bytes32 private constant OP_RMS_DWEIGHT = "rmsnorm.bwd.dweight";
    bytes32 private constant OP_ENC_DWPE = "encoder.bwd.dwpe";
    bytes32 private constant OP_ENC_DWTE = "encoder.bwd.dwte";
    // The ops with one value per row: their level-3 leaf goes on to its elements (isElementOp, docs/contract.md).
    bytes32 private constant OP_XENT_SUM = "xent.sum";
    bytes32 private constant OP_XENT_LOGSUM = "xent.logsum";
    bytes32 private constant OP_XENT_LOSSES = "xent.losses";
    bytes32 private constant OP_LN_MEAN = "layernorm.mean";
    bytes32 private constant OP_LN_VAR = "layernorm.var";
    bytes32 private constant OP_LN_RSTD = "layernorm.rstd";
    bytes32 private constant OP_LN_DMEAN = "layernorm.bwd.dmean";
    bytes32 private constant OP_LN_DNMEAN = "layernorm.bwd.dnmean";
    bytes32 private constant OP_RMS_MS = "rmsnorm.ms";
    bytes32 private constant OP_RMS_RSTD = "rmsnorm.rstd";
    bytes32 private constant OP_RMS_DNMEAN = "rmsnorm.bwd.dnmean";
    bytes32 private constant OP_ATTN_SUM = "attn.sum";
    bytes32 private constant OP_ATTN_R = "attn.bwd.r";
    uint64 private constant LEAF_ELEMENTS = 16384; // float32 elements in a 64 KiB leaf

    OvtArbitration public immutable arbitration;
    mapping(bytes32 => Game) private games;

    // --------------------------------------------------------------- events

    event NarrowStarted(bytes32 indexed gameId, uint64 step, bytes32 previousState, bytes32 batchHash,
                        bytes32 logHash, uint64 deadline);
    event PreviousRoots(bytes32 indexed gameId, bytes32[] roots);
    event TracePosted(bytes32 indexed gameId, address indexed party, bytes32 stateHash, bytes32 traceRoot,
                      uint64 sites, bytes32 statesHash);
    event StageStarted(bytes32 indexed gameId, Stage stage, uint64 count, bytes32 trainerNode, bytes32 auditorNode,
                       uint64 deadline);
    event ChildrenPosted(bytes32 indexed gameId, address indexed party, uint32 round, bytes32 left, bytes32 right);
    event Descended(bytes32 indexed gameId, uint32 round, uint8 level, uint64 index, bytes32 trainerNode,
                    bytes32 auditorNode, uint64 deadline);
    event StatesCompared(bytes32 indexed gameId, uint64 index, uint64 trainerSize, uint64 auditorSize);
    event ItemRevealed(bytes32 indexed gameId, address indexed party, Stage stage, uint64 index, bytes item);
    event Narrowed(bytes32 indexed gameId, uint64 step, Stage stage, uint64 item, bytes32 op, uint64 blockIndex,
                   bytes32 trainerLeaf, bytes32 auditorLeaf, address lastMover);
    event ChunksPosted(bytes32 indexed gameId, address indexed party, bytes32 root, uint64 count);
    event ChunkNarrowed(bytes32 indexed gameId, uint64 chunk, uint64 count, bytes32 trainerNode, bytes32 auditorNode);
    event ElementsPosted(bytes32 indexed gameId, address indexed party, bytes32 root);
    event ElementNarrowed(bytes32 indexed gameId, uint64 element, uint64 count, bytes32 trainerNode,
                          bytes32 auditorNode);
    event Ended(bytes32 indexed gameId, Outcome outcome);
    event Lost(bytes32 indexed gameId, address indexed party, Reason reason);

    // --------------------------------------------------------------- errors

    error NotAwaitingVerdict(OvtArbitration.Phase phase);
    error StepZero();
    error ReplayDispute();  // the game is a replay dispute (site hashes, docs/contract.md): no trace to narrow
    error WrongPhase(Phase expected, Phase actual);
    error WrongRound(uint32 expected, uint32 given);
    error DeadlinePassed(uint64 deadline);
    error NotExpired(uint64 deadline);
    error NotParty(address caller);
    error AlreadyMoved(address party);
    error NotPosted(address party);
    error WrongStage(Stage expected, Stage actual);

    /// arbitration_ must have been constructed with this contract's address
    /// (its CREATE address, from the deployer's next nonce): the probe is a
    /// no-op there, and reverts NotNarrow on any other arbitration contract.
    constructor(OvtArbitration arbitration_) {
        arbitration = arbitration_;
        arbitration_.extendVerdict(bytes32(0), 0);
    }

    // ---------------------------------------------------------------- views

    /// The whole game: its end state once phase is Ended.
    function getNarrow(bytes32 gameId)
        external
        view
        returns (Game memory g)
    {
        g = games[gameId];
    }

    /// stateHash v3 of `roots` (docs/formats.md): SHA-256("ovt.state.v3" ||
    /// configHash || u64le(step) || u32le(roots.length) || roots).
    function stateHashV3(bytes32 configHash, uint64 step, bytes32[] calldata roots) public pure returns (bytes32) {
        return sha256(abi.encodePacked("ovt.state.v3", configHash, _le64(step), _le32(uint32(roots.length)), roots));
    }

    /// Leaves of the tensor tree of an output of `elements` float32 values.
    function outputLeaves(uint64 elements) public pure returns (uint64) {
        uint256 bytes_ = uint256(elements) * 4;
        return bytes_ == 0 ? 1 : uint64((bytes_ + LEAF_BYTES - 1) / LEAF_BYTES);
    }

    // ---------------------------------------------------------------- moves

    /// Opens the narrowing of a game whose step game awaits its verdict
    /// (anyone; postTrace opens it too). Both trace commitments are then due
    /// within the run's moveTimeout.
    function start(bytes32 gameId) public {
        Game storage g = games[gameId];
        if (g.phase != Phase.None) revert WrongPhase(Phase.None, g.phase);
        OvtArbitration.GameView memory v = arbitration.getGame(gameId);
        if (v.phase != OvtArbitration.Phase.AwaitingVerdict) revert NotAwaitingVerdict(v.phase);
        if (v.index == 0) revert StepZero();
        // a replay dispute's nodes are site leaves, not step leaves (flags bit 4: kind KIND_REPLAY)
        if ((v.flags & 16) != 0 && v.trainerRoot == v.auditorRoot) revert ReplayDispute();
        OvtArbitration.RunView memory r = arbitration.getRun(gameId);
        bytes32 tree = arbitration.challengedRun(gameId);
        g.treeId = tree == bytes32(0) ? gameId : tree;
        g.trainer = r.trainer;
        g.auditor = r.auditor;
        g.moveTimeout = r.moveTimeout;
        g.configHash = r.configHash;
        g.step = v.index;
        g.trainerLeaf = v.trainerNode;
        g.auditorLeaf = v.auditorNode;
        g.previousState = v.previousState;
        g.batchHash = v.trainerBatch;
        g.logHash = v.trainerLog;
        g.phase = Phase.Posting;
        uint64 deadline = uint64(block.timestamp) + r.moveTimeout;
        g.deadline = deadline;
        arbitration.extendVerdict(gameId, deadline);
        emit NarrowStarted(gameId, v.index, v.previousState, v.trainerBatch, v.trainerLog, deadline);
    }

    /// A party's trace commitment for step K: its leaf K's preimage, the
    /// trace root and site count, the agreed state K-1's 3*ntensors tensor
    /// roots (the first post only; ignored after), its own state K's roots
    /// and the ntensors tensor sizes (elements, layout order). A post its own
    /// leaf or the agreed stateHash K-1 contradicts loses at once.
    function postTrace(bytes32 gameId, LeafPreimage calldata leaf, bytes32 traceRoot, uint64 sites,
                       bytes32[] calldata previousRoots, bytes32[] calldata roots, uint64[] calldata sizes)
        external
    {
        Game storage g = games[gameId];
        if (g.phase == Phase.None) start(gameId);
        uint8 bit = _enter(g, Phase.Posting, 0);
        if (_leafOf(g, leaf) != (bit == TRAINER ? g.trainerLeaf : g.auditorLeaf))
            return _lose(gameId, g, bit, Reason.BadLeaf);
        if (leaf.batchHash != g.batchHash || leaf.logHash != g.logHash) return _end(gameId, g, Outcome.InputsDiffer);
        if (g.prevCount == 0) {
            if (previousRoots.length == 0 || stateHashV3(g.configHash, g.step - 1, previousRoots) != g.previousState)
                return _lose(gameId, g, bit, Reason.BadPrevious);
            g.prevCount = uint32(previousRoots.length);
            emit PreviousRoots(gameId, previousRoots);
        }
        if (roots.length != g.prevCount || sizes.length * 3 != roots.length
            || stateHashV3(g.configHash, g.step, roots) != leaf.stateHash) return _lose(gameId, g, bit, Reason.BadRoots);
        if (sites == 0) return _lose(gameId, g, bit, Reason.BadTrace);
        _record(gameId, g, bit, leaf.stateHash, traceRoot, sites, keccak256(abi.encodePacked(roots, sizes)));
    }

    function _leafOf(Game storage g, LeafPreimage calldata leaf) private view returns (bytes32) {
        return keccak256(abi.encodePacked(bytes1(0x00), g.treeId, g.step, leaf.stateHash, leaf.batchHash,
                                          leaf.logHash));
    }

    function _record(bytes32 gameId, Game storage g, uint8 bit, bytes32 stateHash, bytes32 traceRoot, uint64 sites,
                     bytes32 statesHash) private {
        Side storage s = bit == TRAINER ? g.t : g.a;
        s.stateHash = stateHash;
        s.traceRoot = traceRoot;
        s.sites = sites;
        s.statesHash = statesHash;
        emit TracePosted(gameId, msg.sender, stateHash, traceRoot, sites, statesHash);
        if (_moved(g, bit)) _comparePosts(gameId, g);
    }

    /// One bisection move: the caller's two children of its current node.
    function descend(bytes32 gameId, uint32 round, bytes32 left, bytes32 right) external {
        Game storage g = games[gameId];
        uint8 bit = _enter(g, Phase.Descending, round);
        Side storage s = bit == TRAINER ? g.t : g.a;
        if (_node(left, right) != s.node) return _lose(gameId, g, bit, Reason.BadChildren);
        emit ChildrenPosted(gameId, msg.sender, round, left, right);
        if (!_moved(g, bit)) {
            g.pendingLeft = left;
            g.pendingRight = right;
            return;
        }
        // The second move: go to the leftmost child where the two differ.
        bool goLeft = left != g.pendingLeft;
        s.node = goLeft ? left : right;
        (bit == TRAINER ? g.a : g.t).node = goLeft ? g.pendingLeft : g.pendingRight;
        g.index = g.index * 2 + (goLeft ? 0 : 1);
        g.level -= 1;
        _nextRound(gameId, g);
        emit Descended(gameId, g.round, g.level, g.index, g.t.node, g.a.node, g.deadline);
        _skipSingles(gameId, g);
    }

    /// Level 4, after level 3 ended on a leaf of a chunk op's site: the
    /// caller's chunk chain (root, count = C + 1 leaves) and the Merkle path
    /// of its last leaf, which must be the caller's level-3 leaf: the left
    /// siblings, bottom up (the last node of a level with no right partner
    /// moves up unchanged, so only levels where it is a right child have
    /// one). A bad proof, or count < 2, loses (BadChain). Both posted:
    /// different counts end CountsDiffer, else the descent over the chains.
    function postChunks(bytes32 gameId, uint32 round, bytes32 root, uint64 count, bytes32[] calldata proof) external {
        Game storage g = games[gameId];
        uint8 bit = _enter(g, Phase.Posting, round);
        if (g.stage != Stage.Chunks) revert WrongStage(Stage.Chunks, g.stage);
        Side storage s = bit == TRAINER ? g.t : g.a;
        if (count < 2 || !_provesLast(root, count, s.blockLeaf, proof)) return _lose(gameId, g, bit, Reason.BadChain);
        s.chainRoot = root;
        s.chunks = count;
        emit ChunksPosted(gameId, msg.sender, root, count);
        if (!_moved(g, bit)) return;
        if (g.t.chunks != g.a.chunks) return _end(gameId, g, Outcome.CountsDiffer);
        _startStage(gameId, g, Stage.Chunks, count, g.t.chainRoot, g.a.chainRoot);
    }

    /// Level 4, after level 3 ended on a leaf of an element op's site
    /// (one value per row): the caller's root of the tree over that leaf's
    /// `count` elements (getNarrow's count: 16384, fewer in the output's
    /// last leaf), leaf i = SHA-256(0x00 || element i, 4 bytes little
    /// endian). Not checked against the party's level-3 leaf (a flat hash
    /// of the 64 KiB): the descent ends on the first element where the two
    /// trees differ, and the arbiter recomputes that element alone. Both
    /// posted: equal roots end ElementsAgree, else the descent.
    function postElements(bytes32 gameId, uint32 round, bytes32 root) external {
        Game storage g = games[gameId];
        uint8 bit = _enter(g, Phase.Posting, round);
        if (g.stage != Stage.Elements) revert WrongStage(Stage.Elements, g.stage);
        (bit == TRAINER ? g.t : g.a).chainRoot = root;
        emit ElementsPosted(gameId, msg.sender, root);
        if (!_moved(g, bit)) return;
        if (g.t.chainRoot == g.a.chainRoot) return _end(gameId, g, Outcome.ElementsAgree);
        _startStage(gameId, g, Stage.Elements, g.count, g.t.chainRoot, g.a.chainRoot);
    }

    /// Whether the sites of `op` have one value per row, so that a level-3
    /// leaf of theirs goes on to stage Elements.
    function isElementOp(bytes32 op) public pure returns (bool) {
        return op == OP_XENT_SUM || op == OP_XENT_LOGSUM || op == OP_XENT_LOSSES || op == OP_LN_MEAN
            || op == OP_LN_VAR || op == OP_LN_RSTD || op == OP_LN_DMEAN || op == OP_LN_DNMEAN || op == OP_RMS_MS
            || op == OP_RMS_RSTD || op == OP_RMS_DNMEAN || op == OP_ATTN_SUM || op == OP_ATTN_R;
    }

    // Whether proof (left siblings, bottom up) takes leaf, the last of a
    // tree of count leaves, to root. The last node of each level is the
    // last one of the level above: it has a left sibling when its index is
    // odd, and none (it moves up unchanged) when even.
    function _provesLast(bytes32 root, uint64 count, bytes32 leaf, bytes32[] calldata proof)
        private
        pure
        returns (bool)
    {
        bytes32 h = leaf;
        uint256 k = 0;
        for (uint256 i = count - 1; i > 0; i >>= 1) {
            if (i & 1 == 0) continue;
            if (k == proof.length) return false;
            h = _node(proof[k++], h);
        }
        return k == proof.length && h == root;
    }

    /// The record at the trace leaf level 2 found: the record of site
    /// `index` (docs/formats.md, "Step trace": u32 site, u8 op length, op,
    /// u64 n, 32-byte root, the reads).
    function reveal(bytes32 gameId, uint32 round, bytes calldata item) external {
        Game storage g = games[gameId];
        uint8 bit = _enter(g, Phase.Revealing, round);
        if (g.stage != Stage.Trace) revert WrongStage(Stage.Trace, g.stage);
        Side storage s = bit == TRAINER ? g.t : g.a;
        if (sha256(abi.encodePacked(bytes1(0x00), item)) != s.node) return _lose(gameId, g, bit, Reason.BadItem);
        (bool ok, uint256 at, uint64 elements, bytes32 op) = _parse(g, item);
        if (!ok) return _lose(gameId, g, bit, Reason.BadItem);
        bytes memory header = item;
        assembly ("memory-safe") {
            mstore(add(add(header, 32), at), 0)
        }
        s.header = keccak256(header);
        s.claim = bytes32(item[at:at + 32]);
        s.elements = elements;
        g.op = op;
        emit ItemRevealed(gameId, msg.sender, g.stage, g.index, item);
        if (!_moved(g, bit)) return;
        if (g.t.header != g.a.header) return _end(gameId, g, Outcome.ItemsDiffer);
        g.item = g.index;
        g.itemStage = g.stage;
        _startStage(gameId, g, Stage.Output, outputLeaves(elements), g.t.claim, g.a.claim);
    }

    /// When the traces agree, the state K roots differ: anyone gives both
    /// parties' posted roots and sizes (each checked against what the party
    /// posted), and the game goes to the first root that differs: level 3
    /// over that tensor's tree, or ItemsDiffer if the two give it different
    /// sizes. Nobody in time: BothSilent.
    function compareStates(bytes32 gameId, uint32 round, bytes32[] calldata trainerRoots,
                           uint64[] calldata trainerSizes, bytes32[] calldata auditorRoots,
                           uint64[] calldata auditorSizes) external {
        Game storage g = games[gameId];
        if (g.phase != Phase.Revealing) revert WrongPhase(Phase.Revealing, g.phase);
        if (g.stage != Stage.States) revert WrongStage(Stage.States, g.stage);
        if (round != g.round) revert WrongRound(g.round, round);
        if (block.timestamp > g.deadline) revert DeadlinePassed(g.deadline);
        if (!_posted(g, trainerRoots, trainerSizes, g.t.statesHash)) revert NotPosted(g.trainer);
        if (!_posted(g, auditorRoots, auditorSizes, g.a.statesHash)) revert NotPosted(g.auditor);
        uint256 j = 0;
        while (trainerRoots[j] == auditorRoots[j]) j++; // one differs: the stateHashes K do
        g.t.claim = trainerRoots[j];
        g.a.claim = auditorRoots[j];
        _pickState(gameId, g, j, trainerSizes[j % trainerSizes.length], auditorSizes[j % auditorSizes.length]);
    }

    // Whether roots and sizes are a party's posted lists: their lengths too,
    // as the packed encoding alone would not tell roots from sizes.
    function _posted(Game storage g, bytes32[] calldata roots, uint64[] calldata sizes, bytes32 statesHash)
        private
        view
        returns (bool)
    {
        return roots.length == g.prevCount && sizes.length * 3 == roots.length
            && keccak256(abi.encodePacked(roots, sizes)) == statesHash;
    }

    function _pickState(bytes32 gameId, Game storage g, uint256 j, uint64 trainerSize, uint64 auditorSize) private {
        g.index = uint64(j);
        g.item = uint64(j);
        g.itemStage = Stage.States;
        g.lastMover = msg.sender;
        emit StatesCompared(gameId, uint64(j), trainerSize, auditorSize);
        if (trainerSize != auditorSize) return _end(gameId, g, Outcome.ItemsDiffer);
        g.t.elements = trainerSize;
        g.a.elements = auditorSize;
        _startStage(gameId, g, Stage.Output, outputLeaves(trainerSize), g.t.claim, g.a.claim);
    }

    /// Ends a game whose deadline passed (anyone): a party that did not move
    /// loses; neither moved: BothSilent.
    function timeout(bytes32 gameId) external {
        Game storage g = games[gameId];
        Phase p = g.phase;
        if (p == Phase.None || p == Phase.Ended || block.timestamp <= g.deadline) revert NotExpired(g.deadline);
        uint8 moved = g.moved;
        if (moved == 0) return _end(gameId, g, Outcome.BothSilent);
        _lose(gameId, g, moved == TRAINER ? AUDITOR : TRAINER, Reason.Timeout);
    }

    // ------------------------------------------------------------- internals

    // Checks a move's phase, round, deadline and caller; returns its bit.
    function _enter(Game storage g, Phase expected, uint32 round) private view returns (uint8 bit) {
        if (g.phase != expected) revert WrongPhase(expected, g.phase);
        if (round != g.round) revert WrongRound(g.round, round);
        if (block.timestamp > g.deadline) revert DeadlinePassed(g.deadline);
        if (msg.sender == g.trainer) bit = TRAINER;
        else if (msg.sender == g.auditor) bit = AUDITOR;
        else revert NotParty(msg.sender);
        if (g.moved & bit != 0) revert AlreadyMoved(msg.sender);
    }

    // Records the caller's move; whether both have now moved this round.
    function _moved(Game storage g, uint8 bit) private returns (bool both) {
        uint8 moved = g.moved | bit;
        g.moved = moved;
        g.lastMover = msg.sender;
        return moved == TRAINER | AUDITOR;
    }

    function _comparePosts(bytes32 gameId, Game storage g) private {
        if (g.t.sites != g.a.sites) return _end(gameId, g, Outcome.CountsDiffer);
        if (g.t.traceRoot != g.a.traceRoot) {
            _startStage(gameId, g, Stage.Trace, g.t.sites, g.t.traceRoot, g.a.traceRoot);
        } else {
            // The traces agree, so some state K root differs (else the stateHashes would).
            g.stage = Stage.States;
            g.phase = Phase.Revealing;
            _nextRound(gameId, g);
            emit StageStarted(gameId, Stage.States, g.prevCount, g.t.statesHash, g.a.statesHash, g.deadline);
        }
    }

    function _startStage(bytes32 gameId, Game storage g, Stage stage, uint64 count, bytes32 trainerNode,
                         bytes32 auditorNode) private {
        g.stage = stage;
        g.count = count;
        g.index = 0;
        uint8 h = 0;
        while ((uint256(1) << h) < count) h++;
        g.level = h;
        g.t.node = trainerNode;
        g.a.node = auditorNode;
        g.phase = Phase.Descending;
        _nextRound(gameId, g);
        emit StageStarted(gameId, stage, count, trainerNode, auditorNode, g.deadline);
        _skipSingles(gameId, g);
    }

    // A fresh round, due within moveTimeout; the verdict's deadline follows
    // it (OvtArbitration.extendVerdict).
    function _nextRound(bytes32 gameId, Game storage g) private {
        g.round += 1;
        g.moved = 0;
        uint64 deadline = uint64(block.timestamp) + g.moveTimeout;
        g.deadline = deadline;
        arbitration.extendVerdict(gameId, deadline);
    }

    // A node whose level below has no right neighbour for it is its only
    // child, unchanged: go down without a move. At a leaf: reveal the item
    // (level 2) or end (level 3).
    function _skipSingles(bytes32 gameId, Game storage g) private {
        uint8 level = g.level;
        uint64 index = g.index;
        uint256 count = g.count;
        while (level > 0) {
            uint256 below = (count + (uint256(1) << (level - 1)) - 1) >> (level - 1);
            if (2 * uint256(index) + 1 < below) break;
            index *= 2;
            level -= 1;
        }
        g.level = level;
        g.index = index;
        if (level > 0) return;
        Stage stage = g.stage;
        if (stage == Stage.Trace || stage == Stage.States) {
            g.phase = Phase.Revealing;
            return;
        }
        bytes32 tLeaf = g.t.node;
        bytes32 aLeaf = g.a.node;
        if (stage == Stage.Output) {
            g.blockIndex = index;
            // a state entry's op is zero (no record revealed): only a trace site goes on
            if (isChunkOp(g.op)) return _startChunks(gameId, g, tLeaf, aLeaf);
            if (isElementOp(g.op) && g.t.elements > index * LEAF_ELEMENTS)
                return _startElements(gameId, g, tLeaf, aLeaf);
        } else {
            g.chunk = index;
            if (stage == Stage.Chunks) emit ChunkNarrowed(gameId, index, g.count, tLeaf, aLeaf);
            else emit ElementNarrowed(gameId, index, g.count, tLeaf, aLeaf);
            tLeaf = g.t.blockLeaf;
            aLeaf = g.a.blockLeaf;
        }
        g.outcome = Outcome.Narrowed;
        g.phase = Phase.Ended;
        g.deadline = 0;
        emit Narrowed(gameId, g.step, g.itemStage, g.item, g.op, g.blockIndex, tLeaf, aLeaf, g.lastMover);
        emit Ended(gameId, Outcome.Narrowed);
    }

    /// Whether the sites of `op` sum over the batch, so that a level-3 leaf
    /// of theirs goes on to stage Chunks: the chunk engine's set
    /// (arb_chunk_supported), which test_contract_narrow keeps equal to this.
    function isChunkOp(bytes32 op) public pure returns (bool) {
        return op == OP_DWEIGHT || op == OP_DBIAS || op == OP_BIAS_BWD || op == OP_CONV_DWEIGHT
            || op == OP_GRADNORM_SUMSQ || op == OP_LN_DBIAS || op == OP_LN_DWEIGHT || op == OP_RMS_DWEIGHT
            || op == OP_ENC_DWPE || op == OP_ENC_DWTE;
    }

    // Level 3 ended on a leaf of a chunk op's site: keep both level-3 leaves
    // and wait for the chunk chains (the round and deadline are already fresh).
    function _startChunks(bytes32 gameId, Game storage g, bytes32 tLeaf, bytes32 aLeaf) private {
        g.t.blockLeaf = tLeaf;
        g.a.blockLeaf = aLeaf;
        g.stage = Stage.Chunks;
        g.phase = Phase.Posting;
        emit StageStarted(gameId, Stage.Chunks, 0, tLeaf, aLeaf, g.deadline);
    }

    // Level 3 ended on a leaf of an element op's site: keep both level-3
    // leaves and wait for the element trees over that leaf's elements (the
    // record's output elements past the leaf's first, at most a leaf's).
    function _startElements(bytes32 gameId, Game storage g, bytes32 tLeaf, bytes32 aLeaf) private {
        uint64 rest = g.t.elements - g.blockIndex * LEAF_ELEMENTS;
        uint64 count = rest < LEAF_ELEMENTS ? rest : LEAF_ELEMENTS;
        g.t.blockLeaf = tLeaf;
        g.a.blockLeaf = aLeaf;
        g.stage = Stage.Elements;
        g.phase = Phase.Posting;
        g.count = count;
        emit StageStarted(gameId, Stage.Elements, count, tLeaf, aLeaf, g.deadline);
    }

    // The revealed record's fields: it must name site `index`. at = the
    // offset of its output root.
    function _parse(Game storage g, bytes calldata item)
        private
        view
        returns (bool ok, uint256 at, uint64 elements, bytes32 op)
    {
        if (item.length < 5 || _readLE(item, 0, 4) != g.index) return (false, 0, 0, 0);
        uint256 oplen = uint8(item[4]);
        at = 5 + oplen + 8;
        if (item.length < at + 32) return (false, 0, 0, 0);
        bytes memory name = item[5:5 + oplen];
        assembly ("memory-safe") {
            op := mload(add(name, 32))
        }
        if (oplen < 32) op &= ~bytes32(type(uint256).max >> (8 * oplen));
        return (true, at, uint64(_readLE(item, 5 + oplen, 8)), op);
    }

    function _lose(bytes32 gameId, Game storage g, uint8 bit, Reason reason) private {
        emit Lost(gameId, bit == TRAINER ? g.trainer : g.auditor, reason);
        _end(gameId, g, bit == TRAINER ? Outcome.TrainerLost : Outcome.AuditorLost);
    }

    function _end(bytes32 gameId, Game storage g, Outcome o) private {
        g.outcome = o;
        g.phase = Phase.Ended;
        g.deadline = 0;
        if (o == Outcome.ItemsDiffer) g.blockIndex = NO_BLOCK;
        emit Ended(gameId, o);
    }

    function _node(bytes32 l, bytes32 r) private pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x01), l, r));
    }

    function _readLE(bytes calldata b, uint256 at, uint256 len) private pure returns (uint256 v) {
        for (uint256 i = 0; i < len; i++) v |= uint256(uint8(b[at + i])) << (8 * i);
    }

    function _le64(uint64 x) private pure returns (bytes8) {
        x = ((x & 0xFF00FF00FF00FF00) >> 8) | ((x & 0x00FF00FF00FF00FF) << 8);
        x = ((x & 0xFFFF0000FFFF0000) >> 16) | ((x & 0x0000FFFF0000FFFF) << 16);
        return bytes8((x >> 32) | (x << 32));
    }

    function _le32(uint32 x) private pure returns (bytes4) {
        x = ((x & 0xFF00FF00) >> 8) | ((x & 0x00FF00FF) << 8);
        return bytes4((x >> 16) | (x << 16));
    }
}
