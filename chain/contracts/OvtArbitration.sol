// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title ovt arbitration: commitments, the bisection game and verdicts.
/// @notice One contract for all runs; every run is keyed by its runId. The
/// game, its rules and the ABI are described in docs/contract.md, which is the
/// only thing the C side (chain/arbitration.h) assumes.
///
/// Tree: leaf i (i = 0..steps) is
///   keccak256(0x00 || runId || uint64be(i) || stateHash_i || batchHash_i || logHash_i)
/// with zero batch and log hashes for i = 0; a node is keccak256(0x01 || left || right);
/// leaves are in index order, padded up to a power of two with the value
/// bytes32(0) (a padding leaf is the zero word itself, not a hash of anything).
contract OvtArbitration {
    // ---------------------------------------------------------------- types

    enum Phase {
        None,            // no such run
        Committing,      // waiting for the two roots
        Bisecting,       // descending the tree, one level per round
        Revealing,       // the disputed step is fixed; leaf preimages due
        AwaitingVerdict, // the arbiter's turn
        Settled          // final; bonds credited
    }

    enum Outcome {
        None,
        Verified,          // equal roots
        TrainerRight,      // verdict (or padding rule): the auditor's leaf is wrong
        AuditorRight,      // verdict (or padding rule): the trainer's leaf is wrong
        Neither,           // verdict (or padding rule): both leaves are wrong
        FraudulentLog,     // verdict: the trainer's rounding log has an invalid entry
        InputsUnavailable, // verdict: the trainer did not make the step's inputs available
        TrainerTimedOut,   // the trainer missed a move
        AuditorTimedOut,   // the auditor missed a move
        BothTimedOut,      // neither party moved in time
        ArbiterTimedOut,   // no verdict in time
        Unchallenged,      // the auditor never committed
        TrainerAbsent      // the auditor committed, the trainer never did
    }

    struct RunParams {
        address trainer;
        address auditor;
        address arbiter;
        bytes32 configHash;
        bytes32 datasetHash;
        uint64 steps;          // N: leaves 0..N
        uint32 commitTimeout;  // seconds the second party has to commit after the first
        uint32 moveTimeout;    // seconds per bisection round and for the leaf reveal
        uint32 arbiterTimeout; // seconds the arbiter has for the verdict
        uint96 trainerBond;    // wei, paid with the trainer's commit
        uint96 auditorBond;    // wei, paid with the auditor's commit
        uint64 nonce;          // chosen by the opener; makes runId unique
    }

    /// The preimage of a leaf after its fixed prefix (0x00, runId, index).
    struct Leaf {
        bytes32 stateHash;
        bytes32 batchHash;
        bytes32 logHash;
    }

    struct RunView {
        address trainer;
        address auditor;
        address arbiter;
        bytes32 configHash;
        bytes32 datasetHash;
        uint64 steps;
        uint32 commitTimeout;
        uint32 moveTimeout;
        uint32 arbiterTimeout;
        uint96 trainerBond;
        uint96 auditorBond;
    }

    struct GameView {
        Phase phase;
        Outcome outcome;
        uint8 round;
        uint8 depth;
        uint8 flags;       // bit 0 trainer moved/committed, bit 1 auditor, bit 2 previous leaf revealed
        uint64 deadline;   // unix seconds; 0 = no deadline running
        uint64 index;      // node index at the current level; the disputed step once Revealing
        bytes32 trainerRoot;
        bytes32 auditorRoot;
        bytes32 trainerNode; // the trainer's node at the current level (its leaf once Revealing)
        bytes32 auditorNode;
        bytes32 previousState; // stateHash of step index-1 once revealed
        bytes32 trainerBatch;  // the trainer's revealed batchHash of the disputed step
        bytes32 trainerLog;    // the trainer's revealed logHash of the disputed step
    }

    // Storage is laid out so a bisection move touches few slots: slot 0 holds
    // the trainer and the game's hot fields, slot 1 the auditor and the index.
    struct Run {
        address trainer;
        uint64 deadline;
        uint8 round;
        Phase phase;
        uint8 flags;
        uint8 depth;
        address auditor;
        uint64 index;
        uint32 moveTimeout;
        address arbiter;
        uint64 steps;
        uint32 arbiterTimeout;
        uint96 trainerBond;
        uint96 auditorBond;
        uint32 commitTimeout;
        Outcome outcome;
        bytes32 configHash;
        bytes32 datasetHash;
        bytes32 trainerRoot;
        bytes32 auditorRoot;
        bytes32 trainerNode;
        bytes32 auditorNode;
        bytes32 pendingLeft;  // the first mover's children in the current round
        bytes32 pendingRight;
        bytes32 previousState;
        bytes32 trainerBatch;
        bytes32 trainerLog;
    }

    uint8 private constant TRAINER = 1;
    uint8 private constant AUDITOR = 2;
    uint8 private constant PREVIOUS = 4;
    uint64 public constant MAX_STEPS = (uint64(1) << 48) - 1;

    bytes32 public constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 public constant COMMITMENT_TYPEHASH =
        keccak256("Commitment(bytes32 runId,bytes32 root,uint64 steps,bytes32 configHash,bytes32 datasetHash)");
    uint256 private constant HALF_ORDER =
        0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    mapping(bytes32 => Run) private runs;
    /// Wei each account can withdraw (bonds are paid by pull).
    mapping(address => uint256) public credit;

    // --------------------------------------------------------------- events

    event RunOpened(bytes32 indexed runId, address indexed trainer, address indexed auditor, address arbiter,
                    bytes32 configHash, bytes32 datasetHash, uint64 steps, uint8 depth, uint64 nonce);
    event Committed(bytes32 indexed runId, address indexed party, bytes32 root, uint256 bond, uint64 deadline);
    event DisputeOpened(bytes32 indexed runId, bytes32 trainerRoot, bytes32 auditorRoot, uint8 depth, uint64 deadline);
    event ChildrenRevealed(bytes32 indexed runId, address indexed party, uint8 round, bytes32 left, bytes32 right);
    event Descended(bytes32 indexed runId, uint8 round, uint64 index, bytes32 trainerNode, bytes32 auditorNode,
                    uint64 deadline);
    event StepFixed(bytes32 indexed runId, uint64 step, bytes32 trainerLeaf, bytes32 auditorLeaf, uint64 deadline);
    event LeafRevealed(bytes32 indexed runId, address indexed party, uint64 step, bytes32 stateHash,
                       bytes32 batchHash, bytes32 logHash);
    event PreviousLeafRevealed(bytes32 indexed runId, uint64 step, bytes32 stateHash, bytes32 batchHash,
                               bytes32 logHash);
    event VerdictDue(bytes32 indexed runId, uint64 step, uint64 deadline);
    event VerdictGiven(bytes32 indexed runId, uint64 step, Outcome outcome, bytes32 evidence);
    event TimedOut(bytes32 indexed runId, Phase phase, uint8 round, uint8 moved);
    event Settled(bytes32 indexed runId, Outcome outcome, uint256 trainerCredit, uint256 auditorCredit);
    event Withdrawn(address indexed account, uint256 amount);

    // --------------------------------------------------------------- errors

    error UnknownRun(bytes32 runId);
    error RunExists(bytes32 runId);
    error BadParty();                       // zero address, or two roles share an address
    error BadSteps(uint64 steps);           // 0, or above MAX_STEPS
    error BadTimeout();                     // a timeout of 0
    error WrongPhase(Phase expected, Phase actual);
    error NotParty(address caller);
    error NotArbiter(address caller);
    error AlreadyMoved(address party);
    error WrongRound(uint8 expected, uint8 given);
    error WrongBond(uint256 expected, uint256 given);
    error ZeroRoot();
    error BadSignature(address signer);     // malformed, high-s, or not the caller's
    error DeadlinePassed(uint64 deadline);
    error NotExpired(uint64 deadline);      // timeout() before the deadline (or with none running)
    error BadChildren(bytes32 node, bytes32 computed);
    error BadLeaf(bytes32 leaf, bytes32 computed);
    error BadStepZero();                    // leaf 0 must have zero batch and log hashes
    error BadProof(bytes32 root, bytes32 computed);
    error WrongStep(uint64 expected, uint64 given);
    error BadOutcome(uint8 outcome);        // a verdict outcome outside 2..6 (or outside the enum)
    error VerdictContradictsLeaves(Outcome outcome, bytes32 evidence);
    error NothingToWithdraw(address account);
    error TransferFailed(address account, uint256 amount);

    // ------------------------------------------------------------ EIP-712

    bytes32 private immutable cachedDomainSeparator;
    uint256 private immutable cachedChainId;

    constructor() {
        cachedChainId = block.chainid;
        cachedDomainSeparator = _domainSeparator();
    }

    function _domainSeparator() private view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, keccak256("ovt"), keccak256("1"), block.chainid, address(this)));
    }

    /// The EIP-712 domain separator: name "ovt", version "1", this chain, this contract.
    function domainSeparator() public view returns (bytes32) {
        return block.chainid == cachedChainId ? cachedDomainSeparator : _domainSeparator();
    }

    /// The EIP-712 digest a party signs to commit `root` for `runId`.
    function commitmentDigest(bytes32 runId, bytes32 root) public view returns (bytes32) {
        Run storage r = _run(runId);
        bytes32 structHash =
            keccak256(abi.encode(COMMITMENT_TYPEHASH, runId, root, r.steps, r.configHash, r.datasetHash));
        return keccak256(abi.encodePacked(hex"1901", domainSeparator(), structHash));
    }

    // ------------------------------------------------------- pure helpers

    /// runId as open() derives it on this chain and contract.
    function computeRunId(RunParams calldata p) public view returns (bytes32) {
        return keccak256(abi.encode(block.chainid, address(this), p));
    }

    function leafHash(bytes32 runId, uint64 index, Leaf calldata leaf) public pure returns (bytes32) {
        return _leafHash(runId, index, leaf.stateHash, leaf.batchHash, leaf.logHash);
    }

    function nodeHash(bytes32 left, bytes32 right) public pure returns (bytes32 h) {
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore8(m, 1)
            mstore(add(m, 1), left)
            mstore(add(m, 33), right)
            h := keccak256(m, 65)
        }
    }

    /// Tree depth for `steps` steps: the least d with 2^d >= steps + 1.
    function depthOf(uint64 steps) public pure returns (uint8 d) {
        uint256 leaves = uint256(steps) + 1;
        while ((uint256(1) << d) < leaves) d++;
    }

    function _leafHash(bytes32 runId, uint64 index, bytes32 s, bytes32 b, bytes32 l)
        private
        pure
        returns (bytes32)
    {
        return keccak256(abi.encodePacked(bytes1(0x00), runId, index, s, b, l));
    }

    // --------------------------------------------------------------- views

    function getRun(bytes32 runId) external view returns (RunView memory v) {
        Run storage r = _run(runId);
        v.trainer = r.trainer;
        v.auditor = r.auditor;
        v.arbiter = r.arbiter;
        v.configHash = r.configHash;
        v.datasetHash = r.datasetHash;
        v.steps = r.steps;
        v.commitTimeout = r.commitTimeout;
        v.moveTimeout = r.moveTimeout;
        v.arbiterTimeout = r.arbiterTimeout;
        v.trainerBond = r.trainerBond;
        v.auditorBond = r.auditorBond;
    }

    function getGame(bytes32 runId) external view returns (GameView memory g) {
        Run storage r = _run(runId);
        g.phase = r.phase;
        g.outcome = r.outcome;
        g.round = r.round;
        g.depth = r.depth;
        g.flags = r.flags;
        g.deadline = r.deadline;
        g.index = r.index;
        g.trainerRoot = r.trainerRoot;
        g.auditorRoot = r.auditorRoot;
        g.trainerNode = r.trainerNode;
        g.auditorNode = r.auditorNode;
        g.previousState = r.previousState;
        g.trainerBatch = r.trainerBatch;
        g.trainerLog = r.trainerLog;
    }

    // ---------------------------------------------------------------- open

    /// Registers a run. Anyone may open it; the parties pay their bonds when
    /// they commit. Reverts if the same parameters and nonce were opened before.
    function open(RunParams calldata p) external returns (bytes32 runId) {
        if (p.trainer == address(0) || p.auditor == address(0) || p.arbiter == address(0)) revert BadParty();
        if (p.trainer == p.auditor || p.arbiter == p.trainer || p.arbiter == p.auditor) revert BadParty();
        if (p.steps == 0 || p.steps > MAX_STEPS) revert BadSteps(p.steps);
        if (p.commitTimeout == 0 || p.moveTimeout == 0 || p.arbiterTimeout == 0) revert BadTimeout();
        runId = computeRunId(p);
        Run storage r = runs[runId];
        if (r.phase != Phase.None) revert RunExists(runId);
        uint8 depth = depthOf(p.steps);
        r.trainer = p.trainer;
        r.phase = Phase.Committing;
        r.depth = depth;
        r.auditor = p.auditor;
        r.moveTimeout = p.moveTimeout;
        r.arbiter = p.arbiter;
        r.steps = p.steps;
        r.arbiterTimeout = p.arbiterTimeout;
        r.trainerBond = p.trainerBond;
        r.auditorBond = p.auditorBond;
        r.commitTimeout = p.commitTimeout;
        r.configHash = p.configHash;
        r.datasetHash = p.datasetHash;
        emit RunOpened(runId, p.trainer, p.auditor, p.arbiter, p.configHash, p.datasetHash, p.steps, depth, p.nonce);
    }

    // -------------------------------------------------------------- commit

    /// A party posts its root with its EIP-712 signature over the Commitment
    /// and its bond (msg.value). The caller must be the signer.
    function commit(bytes32 runId, bytes32 root, bytes calldata signature) external payable {
        Run storage r = _run(runId);
        _expectPhase(r, Phase.Committing);
        uint8 bit = _partyBit(r, msg.sender);
        uint8 flags = r.flags;
        if (flags & bit != 0) revert AlreadyMoved(msg.sender);
        uint64 deadline = r.deadline;
        if (deadline != 0 && block.timestamp > deadline) revert DeadlinePassed(deadline);
        uint256 bond = bit == TRAINER ? r.trainerBond : r.auditorBond;
        if (msg.value != bond) revert WrongBond(bond, msg.value);
        if (root == bytes32(0)) revert ZeroRoot();
        address signer = _recover(commitmentDigest(runId, root), signature);
        if (signer != msg.sender) revert BadSignature(signer);

        if (bit == TRAINER) r.trainerRoot = root;
        else r.auditorRoot = root;
        flags |= bit;
        if (flags != TRAINER | AUDITOR) {
            deadline = uint64(block.timestamp) + r.commitTimeout;
            r.flags = flags;
            r.deadline = deadline;
            emit Committed(runId, msg.sender, root, bond, deadline);
            return;
        }
        emit Committed(runId, msg.sender, root, bond, 0);
        bytes32 trainerRoot = r.trainerRoot;
        bytes32 auditorRoot = r.auditorRoot;
        if (trainerRoot == auditorRoot) {
            r.flags = flags;
            _settle(runId, r, Outcome.Verified);
            return;
        }
        deadline = uint64(block.timestamp) + r.moveTimeout;
        r.phase = Phase.Bisecting;
        r.flags = 0;
        r.round = 0;
        r.deadline = deadline;
        r.trainerNode = trainerRoot;
        r.auditorNode = auditorRoot;
        emit DisputeOpened(runId, trainerRoot, auditorRoot, r.depth, deadline);
    }

    // ----------------------------------------------------------- bisection

    /// One bisection move: the caller reveals the two children of its current
    /// node. When both parties have moved, the game descends to the leftmost
    /// child where they differ.
    function bisect(bytes32 runId, uint8 round, bytes32 left, bytes32 right) external {
        Run storage r = _run(runId);
        _expectPhase(r, Phase.Bisecting);
        if (round != r.round) revert WrongRound(r.round, round);
        if (block.timestamp > r.deadline) revert DeadlinePassed(r.deadline);
        uint8 bit = _partyBit(r, msg.sender);
        uint8 flags = r.flags;
        if (flags & bit != 0) revert AlreadyMoved(msg.sender);
        bytes32 node = bit == TRAINER ? r.trainerNode : r.auditorNode;
        bytes32 computed = nodeHash(left, right);
        if (computed != node) revert BadChildren(node, computed);
        emit ChildrenRevealed(runId, msg.sender, round, left, right);

        if (flags == 0) {
            r.pendingLeft = left;
            r.pendingRight = right;
            r.flags = bit;
            return;
        }
        _descend(runId, r, bit == TRAINER, left, right, round);
    }

    // The second move of a round: compare the caller's children with the
    // first mover's and go to the leftmost child where they differ.
    function _descend(bytes32 runId, Run storage r, bool callerIsTrainer, bytes32 left, bytes32 right, uint8 round)
        private
    {
        bool goLeft = left != r.pendingLeft;
        bytes32 mine = goLeft ? left : right;
        bytes32 theirs = goLeft ? r.pendingLeft : r.pendingRight;
        bytes32 trainerNode = callerIsTrainer ? mine : theirs;
        bytes32 auditorNode = callerIsTrainer ? theirs : mine;
        r.trainerNode = trainerNode;
        r.auditorNode = auditorNode;
        uint64 index = r.index * 2 + (goLeft ? 0 : 1);
        r.index = index;
        uint8 next = round + 1;
        if (next < r.depth) {
            uint64 deadline = uint64(block.timestamp) + r.moveTimeout;
            r.round = next;
            r.flags = 0;
            r.deadline = deadline;
            emit Descended(runId, next, index, trainerNode, auditorNode, deadline);
            return;
        }
        _fixStep(runId, r, index, trainerNode, auditorNode);
    }

    // At the leaf level: a padding position (index > steps) is decided here
    // (the correct value is bytes32(0)); a real step goes to the reveal.
    function _fixStep(bytes32 runId, Run storage r, uint64 index, bytes32 trainerLeaf, bytes32 auditorLeaf) private {
        if (index > r.steps) {
            emit StepFixed(runId, index, trainerLeaf, auditorLeaf, 0);
            if (trainerLeaf != bytes32(0) && auditorLeaf != bytes32(0)) _settle(runId, r, Outcome.Neither);
            else if (trainerLeaf != bytes32(0)) _settle(runId, r, Outcome.AuditorRight);
            else _settle(runId, r, Outcome.TrainerRight);
            return;
        }
        uint64 deadline = uint64(block.timestamp) + r.moveTimeout;
        r.phase = Phase.Revealing;
        r.round = r.depth;
        r.flags = 0;
        r.deadline = deadline;
        emit StepFixed(runId, index, trainerLeaf, auditorLeaf, deadline);
    }

    // ------------------------------------------------------------- reveal

    /// The bottom move: the caller reveals the preimage of its leaf at the
    /// disputed step j. For j > 0 the first of the two reveals must also carry
    /// the agreed leaf j-1 and its Merkle proof (depth siblings, bottom up)
    /// against the caller's own root; the second may pass anything there.
    function revealLeaf(bytes32 runId, uint8 round, Leaf calldata leaf, Leaf calldata previous,
                        bytes32[] calldata proof) external {
        Run storage r = _run(runId);
        _expectPhase(r, Phase.Revealing);
        if (round != r.round) revert WrongRound(r.round, round);
        if (block.timestamp > r.deadline) revert DeadlinePassed(r.deadline);
        uint8 bit = _partyBit(r, msg.sender);
        uint8 flags = r.flags;
        if (flags & bit != 0) revert AlreadyMoved(msg.sender);
        uint64 step = r.index;
        if (step == 0 && (leaf.batchHash != bytes32(0) || leaf.logHash != bytes32(0))) revert BadStepZero();
        bytes32 node = bit == TRAINER ? r.trainerNode : r.auditorNode;
        bytes32 computed = _leafHash(runId, step, leaf.stateHash, leaf.batchHash, leaf.logHash);
        if (computed != node) revert BadLeaf(node, computed);

        if (step > 0 && flags & PREVIOUS == 0) {
            bytes32 root = bit == TRAINER ? r.trainerRoot : r.auditorRoot;
            _checkProof(runId, step - 1, previous, proof, r.depth, root);
            r.previousState = previous.stateHash;
            flags |= PREVIOUS;
            emit PreviousLeafRevealed(runId, step - 1, previous.stateHash, previous.batchHash, previous.logHash);
        }
        if (bit == TRAINER) {
            r.trainerBatch = leaf.batchHash;
            r.trainerLog = leaf.logHash;
        }
        emit LeafRevealed(runId, msg.sender, step, leaf.stateHash, leaf.batchHash, leaf.logHash);
        flags |= bit;
        r.flags = flags;
        if (flags & (TRAINER | AUDITOR) == TRAINER | AUDITOR) {
            uint64 deadline = uint64(block.timestamp) + r.arbiterTimeout;
            r.phase = Phase.AwaitingVerdict;
            r.round = r.depth + 1;
            r.deadline = deadline;
            emit VerdictDue(runId, step, deadline);
        }
    }

    function _checkProof(bytes32 runId, uint64 index, Leaf calldata leaf, bytes32[] calldata proof, uint8 depth,
                         bytes32 root) private pure {
        bytes32 h = _leafHash(runId, index, leaf.stateHash, leaf.batchHash, leaf.logHash);
        if (proof.length != depth) revert BadProof(root, bytes32(0));
        uint64 at = index;
        for (uint256 k = 0; k < depth; k++) {
            h = (at & 1) == 0 ? nodeHash(h, proof[k]) : nodeHash(proof[k], h);
            at >>= 1;
        }
        if (h != root) revert BadProof(root, h);
    }

    // ------------------------------------------------------------- verdict

    /// The run's arbiter states the disputed step, the outcome and the
    /// evidence; the contract checks the evidence against the revealed leaves
    /// (rules in docs/contract.md). One verdict, final. The outcome comes as
    /// its uint8 (the ABI type of the enum, so the selector is the same): a
    /// value outside the enum is refused with BadOutcome, where the ABI
    /// decoder of an enum parameter would revert with no data at all.
    function verdict(bytes32 runId, uint64 step, uint8 outcomeCode, bytes32 evidence) external {
        if (outcomeCode > uint8(type(Outcome).max)) revert BadOutcome(outcomeCode);
        Outcome outcome = Outcome(outcomeCode);
        Run storage r = _run(runId);
        _expectPhase(r, Phase.AwaitingVerdict);
        if (msg.sender != r.arbiter) revert NotArbiter(msg.sender);
        if (block.timestamp > r.deadline) revert DeadlinePassed(r.deadline);
        if (step != r.index) revert WrongStep(r.index, step);
        bool consistent;
        if (outcome == Outcome.TrainerRight) {
            consistent = evidence == r.trainerNode;
        } else if (outcome == Outcome.AuditorRight) {
            consistent = evidence == r.auditorNode;
        } else if (outcome == Outcome.Neither) {
            consistent = evidence != bytes32(0) && evidence != r.trainerNode && evidence != r.auditorNode;
        } else if (outcome == Outcome.FraudulentLog) {
            consistent = evidence != bytes32(0) && evidence == r.trainerLog;
        } else if (outcome == Outcome.InputsUnavailable) {
            consistent = evidence != bytes32(0)
                && (evidence == r.trainerBatch || evidence == r.trainerLog || evidence == r.datasetHash
                    || (step > 0 && evidence == r.previousState));
        } else {
            revert BadOutcome(outcomeCode);
        }
        if (!consistent) revert VerdictContradictsLeaves(outcome, evidence);
        emit VerdictGiven(runId, step, outcome, evidence);
        _settle(runId, r, outcome);
    }

    // ------------------------------------------------------------- timeout

    /// Ends a run whose deadline has passed; anyone may call it. In the game
    /// a party that did not move loses; if neither moved, or the arbiter did
    /// not give a verdict, both bonds are refunded.
    function timeout(bytes32 runId) external {
        Run storage r = _run(runId);
        Phase phase = r.phase;
        uint64 deadline = r.deadline;
        if (phase == Phase.Settled || deadline == 0 || block.timestamp <= deadline) revert NotExpired(deadline);
        uint8 moved = r.flags & (TRAINER | AUDITOR);
        Outcome o;
        if (phase == Phase.Committing) {
            o = moved == TRAINER ? Outcome.Unchallenged : Outcome.TrainerAbsent;
        } else if (phase == Phase.AwaitingVerdict) {
            o = Outcome.ArbiterTimedOut;
        } else if (moved == 0) {
            o = Outcome.BothTimedOut;
        } else {
            o = moved == TRAINER ? Outcome.AuditorTimedOut : Outcome.TrainerTimedOut;
        }
        emit TimedOut(runId, phase, r.round, moved);
        _settle(runId, r, o);
    }

    // ---------------------------------------------------------------- bonds

    /// Pays the caller everything credited to it.
    function withdraw() external {
        uint256 amount = credit[msg.sender];
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        credit[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        (bool ok,) = payable(msg.sender).call{value: amount}("");
        if (!ok) revert TransferFailed(msg.sender, amount);
    }

    // Credits the bonds that were paid in according to the outcome and closes the run.
    function _settle(bytes32 runId, Run storage r, Outcome o) private {
        bool both = r.phase != Phase.Committing;
        uint256 trainerPaid = both || r.flags & TRAINER != 0 ? r.trainerBond : 0;
        uint256 auditorPaid = both || r.flags & AUDITOR != 0 ? r.auditorBond : 0;
        uint256 toTrainer;
        uint256 toAuditor;
        if (o == Outcome.TrainerRight || o == Outcome.AuditorTimedOut) {
            toTrainer = trainerPaid + auditorPaid;
        } else if (o == Outcome.AuditorRight || o == Outcome.FraudulentLog || o == Outcome.InputsUnavailable
                   || o == Outcome.TrainerTimedOut) {
            toAuditor = trainerPaid + auditorPaid;
        } else {
            toTrainer = trainerPaid;
            toAuditor = auditorPaid;
        }
        r.phase = Phase.Settled;
        r.outcome = o;
        r.deadline = 0;
        if (toTrainer != 0) credit[r.trainer] += toTrainer;
        if (toAuditor != 0) credit[r.auditor] += toAuditor;
        emit Settled(runId, o, toTrainer, toAuditor);
    }

    // ------------------------------------------------------------- internal

    function _run(bytes32 runId) private view returns (Run storage r) {
        r = runs[runId];
        if (r.phase == Phase.None) revert UnknownRun(runId);
    }

    function _expectPhase(Run storage r, Phase expected) private view {
        Phase actual = r.phase;
        if (actual != expected) revert WrongPhase(expected, actual);
    }

    function _partyBit(Run storage r, address who) private view returns (uint8) {
        if (who == r.trainer) return TRAINER;
        if (who == r.auditor) return AUDITOR;
        revert NotParty(who);
    }

    // ecrecover over a 65-byte r || s || v signature; v may be 27/28 or 0/1.
    // Returns address(0) for anything malformed or with a high s.
    function _recover(bytes32 digest, bytes calldata sig) private pure returns (address) {
        if (sig.length != 65) return address(0);
        bytes32 r = bytes32(sig[0:32]);
        bytes32 s = bytes32(sig[32:64]);
        uint8 v = uint8(sig[64]);
        if (v < 27) v += 27;
        if ((v != 27 && v != 28) || uint256(s) > HALF_ORDER) return address(0);
        return ecrecover(digest, v, r, s);
    }
}
