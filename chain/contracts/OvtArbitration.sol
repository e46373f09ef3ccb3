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
        ArbiterTimedOut,   // fewer than the threshold of verdicts revealed in time
        Unchallenged,      // the auditor never committed
        TrainerAbsent,     // the auditor committed, the trainer never did
        NoMajority,        // a committee revealed enough verdicts, but no threshold of them agree
        Cancelled          // nobody committed within commitTimeout of open; every bond paid in returned
    }

    struct RunParams {
        address trainer;
        address auditor;
        address[5] arbiters;   // the committee: n = the leading non-zero entries, the rest zero
        bytes32 configHash;
        bytes32 datasetHash;
        uint64 steps;          // N: leaves 0..N
        uint32 commitTimeout;  // seconds for the first commit after open, and for the second after the first
        uint32 moveTimeout;    // seconds per bisection round and for the leaf reveal
        uint32 arbiterTimeout; // seconds the arbiter has for the verdict
        uint96 trainerBond;    // wei, paid with the trainer's commit
        uint96 auditorBond;    // wei, paid with the auditor's commit
        uint8 threshold;       // m matching verdicts settle: n/2 < m <= n
        uint96 arbiterBond;    // wei each arbiter pays with accept(); 0 = every named arbiter is seated
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
        address[5] arbiters;
        bytes32 configHash;
        bytes32 datasetHash;
        uint64 steps;
        uint32 commitTimeout;
        uint32 moveTimeout;
        uint32 arbiterTimeout;
        uint96 trainerBond;
        uint96 auditorBond;
        uint8 threshold;       // m
        uint96 arbiterBond;
    }

    /// A run's committee and its ballots (getCommittee). Seat k is bit k of
    /// the masks; seat 0 is arbiters[0].
    struct CommitteeView {
        uint8 count;           // n
        uint8 threshold;       // m
        uint8 seated;          // who may vote: every seat when arbiterBond is 0, else those that accepted
        uint8 committed;       // sealed a verdict (commitVerdict)
        uint8 revealed;        // opened it (revealVerdict); n = 1's verdict() is not here: see getGame
        uint64 commitDeadline; // while AwaitingVerdict: ballots until then, reveals until the game's deadline
        uint8[5] outcomes;     // revealed outcome per seat (0 = none)
        bytes32[5] ballots;    // sealed ballot per seat, replaced by its evidence once revealed
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
        uint8 arbiterCount;   // n (1..MAX_ARBITERS); seat 0 is `arbiter`, the others in committees
        uint8 threshold;      // m
        uint8 kind;           // KIND_RUN; KIND_CHALLENGE: a challenge of another run's trainer root (challenge()),
                              // its leaves are that run's; KIND_REPLAY: a run with proof of replay (commitReplay)
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

    /// A committee beyond seat 0: kept apart from Run so a one-arbiter run
    /// with no arbiter bond never touches it but for one read of `bond`.
    struct Committee {
        uint96 bond;
        uint8 accepted;
        uint8 committed;
        uint8 revealed;
        uint40 outcomes;      // 8 bits per seat
        uint64 challengeCloses; // the last second challenge() takes (0: the trainer has not committed, or no bond)
        address[4] more;      // seats 1..4
        bytes32[5] ballot;    // sealed ballot, then the revealed evidence
    }

    uint8 private constant TRAINER = 1;
    uint8 private constant AUDITOR = 2;
    uint8 private constant PREVIOUS = 4;
    uint8 private constant KIND_CHALLENGE = 1;
    uint8 private constant KIND_REPLAY = 2;
    uint64 public constant MAX_STEPS = (uint64(1) << 48) - 1;
    uint8 public constant MAX_ARBITERS = 5;
    // The outcomes that show the trainer's root wrong: AuditorRight,
    // Neither, FraudulentLog, InputsUnavailable, TrainerTimedOut (bit = code).
    uint256 private constant REFUTING = (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7);

    bytes32 public constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 public constant COMMITMENT_TYPEHASH =
        keccak256("Commitment(bytes32 runId,bytes32 root,uint64 steps,bytes32 configHash,bytes32 datasetHash)");
    uint256 private constant HALF_ORDER =
        0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    mapping(bytes32 => Run) private runs;
    mapping(bytes32 => Committee) private committees;
    /// Wei each account can withdraw (bonds are paid by pull).
    mapping(address => uint256) public credit;
    /// A challenge's run (challenge()): its leaves are hashed with that runId.
    mapping(bytes32 => bytes32) public challengedRun;
    /// The first game that proved a run's trainer root wrong: the run itself
    /// (its named auditor won) or a challenge of it; zero while none has.
    mapping(bytes32 => bytes32) public refutedBy;

    /// Proof of replay (commitReplay): the beacon fixed at the trainer's
    /// commit, which picks the site (beacon mod the step's site count, off
    /// chain), and the two site roots: per step i the leaf
    /// keccak256(0x02 || runId || uint64be(i) || siteHash_i) (docs/contract.md).
    struct Replay {
        bytes32 beacon;
        bytes32 trainerSites; // revealed after the auditor's (revealSites)
        bytes32 auditorSites; // with the auditor's commit
    }
    mapping(bytes32 => Replay) public replays;

    // --------------------------------------------------------------- events

    event RunOpened(bytes32 indexed runId, address indexed trainer, address indexed auditor, address[5] arbiters,
                    uint8 threshold, uint96 arbiterBond, bytes32 configHash, bytes32 datasetHash, uint64 steps,
                    uint8 depth, uint64 nonce);
    event ArbiterAccepted(bytes32 indexed runId, address indexed arbiter, uint8 seat, uint256 bond);
    event VerdictCommitted(bytes32 indexed runId, address indexed arbiter, bytes32 ballot);
    event VerdictRevealed(bytes32 indexed runId, address indexed arbiter, uint64 step, Outcome outcome,
                          bytes32 evidence);
    /// At settlement, one per seated arbiter: what it revealed (None if
    /// nothing), the bond it lost and the forfeits it was paid.
    event ArbiterSettled(bytes32 indexed runId, address indexed arbiter, Outcome verdict, uint256 forfeited,
                         uint256 reward);
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
    event ChallengeOpened(bytes32 indexed runId, bytes32 indexed challengeId, address indexed challenger, bytes32 root,
                          uint256 bond, uint64 deadline);
    event Refuted(bytes32 indexed runId, bytes32 indexed gameId, Outcome outcome);

    // --------------------------------------------------------------- errors

    error UnknownRun(bytes32 runId);
    error RunExists(bytes32 runId);
    error BadParty();                       // zero address, or two roles share an address
    error BadCommittee();                   // no arbiter, more than MAX_ARBITERS, or a gap in the list
    error BadThreshold(uint8 threshold, uint8 count); // not n/2 < m <= n
    error NotCommitted(address arbiter);    // revealVerdict without a ballot
    error RevealsNotOpen(uint64 commitDeadline); // revealVerdict while ballots may still come
    error BadBallot(bytes32 ballot, bytes32 computed);
    error CommitteeRun();                   // verdict() on a run with n > 1 (it takes ballots)
    error SingleArbiterRun();               // a ballot on a run with n = 1 (it takes verdict())
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
    error ChallengesClosed(uint64 closes);  // challenge() before the trainer's commit, after the window, with no
                                            // auditor bond, or of a challenge
    error NothingToDispute(bytes32 root);   // challenge() with the trainer's own root
    error ReplayRequired();                 // a plain commit by the auditor of a run with proof of replay
    error NoBeacon();                       // commitReplay by the auditor before the trainer's, by the trainer
                                            // after the auditor's commit
    error SitesNotDue();                    // revealSites while no site root is due from the trainer
    error WrongReveal();                    // revealLeaf in a replay dispute, revealSite in a root dispute
    error NotNarrow(address caller);        // extendVerdict by anyone but the bound narrowing contract

    // ------------------------------------------------------------ EIP-712

    bytes32 private immutable cachedDomainSeparator;
    uint256 private immutable cachedChainId;
    // The narrowing contract (OvtNarrow) bound to this one: the only caller
    // of extendVerdict. Fixed at construction (the deployer gives the
    // address its next creation will have); zero: no narrowing extends.
    // Private: a public getter costs 100 bytes of the EIP-170 room, and
    // OvtNarrow's constructor checks the binding (docs/contract.md).
    address private immutable narrow;

    constructor(address narrow_) {
        narrow = narrow_;
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

    /// A site tree's leaf (proof of replay): step i's hash of the beacon's site's output.
    function siteLeafHash(bytes32 runId, uint64 index, bytes32 siteHash) public pure returns (bytes32) {
        return keccak256(abi.encodePacked(bytes1(0x02), runId, index, siteHash));
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
        v.arbiters = _arbiters(r, committees[runId]);
        v.threshold = r.threshold;
        v.arbiterBond = committees[runId].bond;
        v.configHash = r.configHash;
        v.datasetHash = r.datasetHash;
        v.steps = r.steps;
        v.commitTimeout = r.commitTimeout;
        v.moveTimeout = r.moveTimeout;
        v.arbiterTimeout = r.arbiterTimeout;
        v.trainerBond = r.trainerBond;
        v.auditorBond = r.auditorBond;
    }

    function getCommittee(bytes32 runId) external view returns (CommitteeView memory v) {
        Run storage r = _run(runId);
        Committee storage c = committees[runId];
        uint8 n = r.arbiterCount;
        v.count = n;
        v.threshold = r.threshold;
        v.seated = _seated(c, n);
        v.committed = c.committed;
        v.revealed = c.revealed;
        if (r.phase == Phase.AwaitingVerdict) v.commitDeadline = r.deadline - r.arbiterTimeout;
        uint40 outcomes = c.outcomes;
        for (uint256 k = 0; k < n; k++) {
            v.outcomes[k] = uint8(outcomes >> (8 * k));
            v.ballots[k] = c.ballot[k];
        }
    }

    /// The sealed ballot an arbiter posts with commitVerdict: it binds the
    /// run, the arbiter (so another cannot post it as its own) and a secret
    /// salt (so the verdict cannot be read from it before the reveal).
    function ballotHash(bytes32 runId, address arbiter, uint64 step, uint8 outcome, bytes32 evidence, bytes32 salt)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(runId, arbiter, step, outcome, evidence, salt));
    }

    function getGame(bytes32 runId) external view returns (GameView memory g) {
        Run storage r = _run(runId);
        g.phase = r.phase;
        g.outcome = r.outcome;
        g.round = r.round;
        g.depth = r.depth;
        g.flags = r.flags | (r.kind << 3);
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
    /// The first commitment is due within commitTimeout: a run nobody commits
    /// to by then is ended by timeout() as Cancelled, returning every bond
    /// paid into it (an arbiter's accept()), so no opener can hold a bond.
    function open(RunParams calldata p) external returns (bytes32 runId) {
        if (p.trainer == address(0) || p.auditor == address(0) || p.trainer == p.auditor) revert BadParty();
        (uint8 n, uint8 m) = _checkCommittee(p);
        if (p.steps == 0 || p.steps > MAX_STEPS) revert BadSteps(p.steps);
        if (p.commitTimeout == 0 || p.moveTimeout == 0 || p.arbiterTimeout == 0) revert BadTimeout();
        runId = computeRunId(p);
        Run storage r = runs[runId];
        if (r.phase != Phase.None) revert RunExists(runId);
        uint8 depth = depthOf(p.steps);
        r.trainer = p.trainer;
        r.deadline = uint64(block.timestamp) + p.commitTimeout;
        r.phase = Phase.Committing;
        r.depth = depth;
        r.auditor = p.auditor;
        r.moveTimeout = p.moveTimeout;
        r.arbiter = p.arbiters[0];
        r.steps = p.steps;
        r.arbiterTimeout = p.arbiterTimeout;
        r.trainerBond = p.trainerBond;
        r.auditorBond = p.auditorBond;
        r.commitTimeout = p.commitTimeout;
        r.arbiterCount = n;
        r.threshold = m;
        r.configHash = p.configHash;
        r.datasetHash = p.datasetHash;
        if (n > 1 || p.arbiterBond != 0) {
            Committee storage c = committees[runId];
            c.bond = p.arbiterBond;
            for (uint256 k = 1; k < n; k++) c.more[k - 1] = p.arbiters[k];
        }
        _emitOpened(runId, p, m, depth);
    }

    function _emitOpened(bytes32 runId, RunParams calldata p, uint8 m, uint8 depth) private {
        emit RunOpened(runId, p.trainer, p.auditor, p.arbiters, m, p.arbiterBond, p.configHash, p.datasetHash,
                       p.steps, depth, p.nonce);
    }

    // n = the leading non-zero arbiters (the rest must be zero), each
    // distinct from the parties and from each other; n/2 < m <= n (m is
    // explicit, so the runId names it; the C side fills in a majority).
    function _checkCommittee(RunParams calldata p) private pure returns (uint8 n, uint8 m) {
        while (n < MAX_ARBITERS && p.arbiters[n] != address(0)) n++;
        if (n == 0) revert BadCommittee();
        for (uint256 k = n; k < MAX_ARBITERS; k++) if (p.arbiters[k] != address(0)) revert BadCommittee();
        for (uint256 k = 0; k < n; k++) {
            address a = p.arbiters[k];
            if (a == p.trainer || a == p.auditor) revert BadParty();
            for (uint256 j = 0; j < k; j++) if (p.arbiters[j] == a) revert BadParty();
        }
        m = p.threshold;
        if (2 * uint256(m) <= n || m > n) revert BadThreshold(m, n);
    }

    // ------------------------------------------------------------ arbiters

    /// A named arbiter takes its seat, paying the run's arbiter bond, any
    /// time before the verdict is due. With an arbiter bond of 0 every named
    /// arbiter is seated from the start and accept() changes nothing.
    function accept(bytes32 runId) external payable {
        Run storage r = _run(runId);
        Phase phase = r.phase;
        if (phase == Phase.AwaitingVerdict || phase == Phase.Settled) revert WrongPhase(Phase.Revealing, phase);
        Committee storage c = committees[runId];
        uint8 seat = _seat(r, c, msg.sender);
        uint8 bit = uint8(1) << seat;
        if (c.accepted & bit != 0) revert AlreadyMoved(msg.sender);
        uint256 bond = c.bond;
        if (msg.value != bond) revert WrongBond(bond, msg.value);
        c.accepted |= bit;
        emit ArbiterAccepted(runId, msg.sender, seat, bond);
    }

    // -------------------------------------------------------------- commit

    /// A party posts its root with its EIP-712 signature over the Commitment
    /// and its bond (msg.value). The caller must be the signer.
    function commit(bytes32 runId, bytes32 root, bytes calldata signature) external payable {
        _commit(runId, root, signature, false, 0);
    }

    /// Proof of replay (docs/contract.md): the trainer's commitReplay (sites
    /// ignored, its own site root comes with revealSites) fixes the beacon and
    /// makes the run one whose auditor must commitReplay too, with `sites`,
    /// its root over the beacon's site of every step of its replay; the
    /// auditor's plain commit is then refused. Equal roots then wait for the
    /// trainer's site root (revealSites), not Verified at once.
    function commitReplay(bytes32 runId, bytes32 root, bytes32 sites, bytes calldata signature) external payable {
        _commit(runId, root, signature, true, sites);
    }

    function _commit(bytes32 runId, bytes32 root, bytes calldata signature, bool replay, bytes32 sites) private {
        Run storage r = _run(runId);
        _expectPhase(r, Phase.Committing);
        uint8 bit = _partyBit(r, msg.sender);
        uint8 flags = r.flags;
        if (flags & bit != 0) revert AlreadyMoved(msg.sender);
        uint64 deadline = r.deadline;
        if (block.timestamp > deadline) revert DeadlinePassed(deadline);
        uint256 bond = bit == TRAINER ? r.trainerBond : r.auditorBond;
        if (msg.value != bond) revert WrongBond(bond, msg.value);
        if (root == bytes32(0)) revert ZeroRoot();
        address signer = _recover(commitmentDigest(runId, root), signature);
        if (signer != msg.sender) revert BadSignature(signer);

        _record(runId, r, bit, flags, root, replay, sites);
        flags |= bit;
        if (flags != TRAINER | AUDITOR) {
            deadline = uint64(block.timestamp) + r.commitTimeout;
            r.flags = flags;
            r.deadline = deadline;
            emit Committed(runId, msg.sender, root, bond, deadline);
            return;
        }
        bytes32 trainerRoot = r.trainerRoot;
        bytes32 auditorRoot = r.auditorRoot;
        if (trainerRoot == auditorRoot) {
            r.flags = flags;
            if (r.kind == KIND_REPLAY) {
                // The trainer's site root is due (revealSites), within commitTimeout.
                deadline = uint64(block.timestamp) + r.commitTimeout;
                r.deadline = deadline;
                emit Committed(runId, msg.sender, root, bond, deadline);
                return;
            }
            emit Committed(runId, msg.sender, root, bond, 0);
            _settle(runId, r, Outcome.Verified, 0);
            return;
        }
        emit Committed(runId, msg.sender, root, bond, 0);
        _openDispute(runId, r, trainerRoot, auditorRoot);
    }

    // Bisecting from round 0 over the two trees whose roots are given: the
    // roots' (a root dispute) or the site roots' (a replay dispute).
    function _openDispute(bytes32 runId, Run storage r, bytes32 trainerNode, bytes32 auditorNode) private {
        uint64 deadline = uint64(block.timestamp) + r.moveTimeout;
        r.phase = Phase.Bisecting;
        r.flags = 0;
        r.round = 0;
        r.deadline = deadline;
        r.trainerNode = trainerNode;
        r.auditorNode = auditorNode;
        emit DisputeOpened(runId, trainerNode, auditorNode, r.depth, deadline);
    }

    // A commit's root (and for proof of replay the beacon, or the auditor's
    // site root) recorded.
    function _record(bytes32 runId, Run storage r, uint8 bit, uint8 flags, bytes32 root, bool replay, bytes32 sites)
        private
    {
        if (bit == TRAINER) {
            r.trainerRoot = root;
            if (r.auditorBond != 0) committees[runId].challengeCloses = uint64(block.timestamp) + r.commitTimeout;
            if (replay) {
                if (flags & AUDITOR != 0) revert NoBeacon();
                r.kind = KIND_REPLAY;
                replays[runId].beacon = keccak256(abi.encode(runId, blockhash(block.number - 1)));
            }
            return;
        }
        if (replay != (r.kind == KIND_REPLAY)) {
            if (replay) revert NoBeacon();
            revert ReplayRequired();
        }
        if (replay) {
            if (sites == bytes32(0)) revert ZeroRoot();
            replays[runId].auditorSites = sites;
        }
        r.auditorRoot = root;
    }

    /// The trainer's site root of a run with proof of replay, once the roots
    /// agree (both committed, the auditor's site root known), before the
    /// deadline: equal site roots settle Verified (the auditor replayed);
    /// different ones open the replay dispute, the bisection over the two
    /// site trees (revealSite at the bottom). Missing it: TrainerTimedOut.
    function revealSites(bytes32 runId, bytes32 sites) external {
        Run storage r = _run(runId);
        _expectPhase(r, Phase.Committing);
        if (msg.sender != r.trainer) revert NotParty(msg.sender);
        if (r.kind != KIND_REPLAY || r.flags != TRAINER | AUDITOR) revert SitesNotDue();
        uint64 deadline = r.deadline;
        if (block.timestamp > deadline) revert DeadlinePassed(deadline);
        if (sites == bytes32(0)) revert ZeroRoot();
        Replay storage x = replays[runId];
        x.trainerSites = sites;
        bytes32 auditorSites = x.auditorSites;
        if (sites == auditorSites) {
            _settle(runId, r, Outcome.Verified, 0);
            return;
        }
        _openDispute(runId, r, sites, auditorSites);
    }

    // ---------------------------------------------------------- challenges

    /// Open challenges (issue 43): any account but the run's parties and
    /// arbiters disputes the trainer's root of runId with its own root and
    /// a bond equal to the auditor's, from the trainer's commit until
    /// commitTimeout after it. Each challenge is a game of its own, keyed
    /// challengeId = keccak256(abi.encode(runId, challenger)), played exactly
    /// as a run's dispute (bisect, revealLeaf, the verdict, timeout) between
    /// the trainer and the challenger, with the run's committee and terms;
    /// its leaves are the run's (hashed with runId). The trainer stakes
    /// nothing in it: a challenger that loses pays its bond to the trainer,
    /// one that wins gets its bond back and the run is marked refuted
    /// (refutedBy), so no number of challengers can take an honest trainer's
    /// bond. A run whose auditor bond is 0 takes no challenges.
    function challenge(bytes32 runId, bytes32 root) external payable returns (bytes32 challengeId) {
        Run storage r = _run(runId);
        uint64 closes = committees[runId].challengeCloses;
        if (closes == 0 || block.timestamp > closes) revert ChallengesClosed(closes);
        if (root == bytes32(0)) revert ZeroRoot();
        bytes32 trainerRoot = r.trainerRoot;
        if (root == trainerRoot) revert NothingToDispute(root);
        if (msg.sender == r.trainer || msg.sender == r.auditor || _named(r, committees[runId], msg.sender)) {
            revert BadParty();
        }
        uint256 bond = r.auditorBond;
        if (msg.value != bond) revert WrongBond(bond, msg.value);
        challengeId = keccak256(abi.encode(runId, msg.sender));
        Run storage x = runs[challengeId];
        if (x.phase != Phase.None) revert RunExists(challengeId);
        uint64 deadline = uint64(block.timestamp) + r.moveTimeout;
        _copyTerms(x, r, deadline);
        x.auditorRoot = root;
        x.auditorNode = root;
        _copyCommittee(committees[challengeId], committees[runId], r.arbiterCount);
        challengedRun[challengeId] = runId;
        emit ChallengeOpened(runId, challengeId, msg.sender, root, bond, deadline);
    }

    // A challenge's game takes the run's terms, slot by slot (the layout of
    // struct Run): the trainer and the depth, phase Bisecting from round 0
    // with the deadline; the challenger as the auditor with the run's
    // moveTimeout; the arbiter, steps and arbiterTimeout; the bonds with the
    // trainer's set to 0 and the auditor's (the challenger's) kept, the
    // commitTimeout, n and m, no outcome, the challenge flag; both hashes;
    // the trainer's root as its root and current node.
    function _copyTerms(Run storage x, Run storage r, uint64 deadline) private {
        assembly ("memory-safe") {
            let from := r.slot
            let to := x.slot
            let s0 := sload(from)
            // trainer (bits 0-159) and depth (248-255); deadline at 160, phase 2 at 232
            sstore(to, or(or(and(s0, 0xff0000000000000000000000ffffffffffffffffffffffffffffffffffffffff),
                             shl(160, deadline)), shl(232, 2)))
            // the challenger (bits 0-159), index 0, the run's moveTimeout (224-255)
            sstore(add(to, 1), or(caller(), and(sload(add(from, 1)), shl(224, 0xffffffff))))
            sstore(add(to, 2), sload(add(from, 2)))
            // clear the trainer's bond (0-95) and the outcome (224-231), set the flag (248-255)
            let s3 := and(sload(add(from, 3)), not(or(0xffffffffffffffffffffffff, shl(224, 0xff))))
            sstore(add(to, 3), or(and(s3, not(shl(248, 0xff))), shl(248, 1)))
            sstore(add(to, 4), sload(add(from, 4)))
            sstore(add(to, 5), sload(add(from, 5)))
            let trainerRoot := sload(add(from, 6))
            sstore(add(to, 6), trainerRoot)
            sstore(add(to, 8), trainerRoot)
        }
    }

    function _copyCommittee(Committee storage to, Committee storage from, uint8 n) private {
        uint96 bond = from.bond;
        if (n == 1 && bond == 0) return;
        to.bond = bond;
        for (uint256 k = 1; k < n; k++) to.more[k - 1] = from.more[k - 1];
    }

    function _named(Run storage r, Committee storage c, address who) private view returns (bool) {
        if (who == r.arbiter) return true;
        uint8 n = r.arbiterCount;
        for (uint8 k = 1; k < n; k++) if (c.more[k - 1] == who) return true;
        return false;
    }

    // The id a game's leaves are hashed with: the run's own, or for a
    // challenge the run it disputes.
    function _treeOf(bytes32 gameId, Run storage r) private view returns (bytes32) {
        return r.kind == KIND_CHALLENGE ? challengedRun[gameId] : gameId;
    }

    // The trainer's root of a run (or of the run a challenge disputes) is
    // wrong: recorded once, by the first game that showed it.
    function _refute(bytes32 gameId, Run storage r, Outcome o) private {
        bytes32 runId = _treeOf(gameId, r);
        if (refutedBy[runId] != bytes32(0)) return;
        refutedBy[runId] = gameId;
        emit Refuted(runId, gameId, o);
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
            if (trainerLeaf != bytes32(0) && auditorLeaf != bytes32(0)) _settle(runId, r, Outcome.Neither, 0);
            else if (trainerLeaf != bytes32(0)) _settle(runId, r, Outcome.AuditorRight, 0);
            else _settle(runId, r, Outcome.TrainerRight, 0);
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
        (Run storage r, uint8 bit, uint8 flags, uint64 step) = _revealStart(runId, round, false, leaf);
        _checkLeaf(r, bit, leafHash(_treeOf(runId, r), step, leaf));
        if (step > 0 && flags & PREVIOUS == 0) {
            _provePrevious(runId, _treeOf(runId, r), r, bit == TRAINER ? r.trainerRoot : r.auditorRoot, step,
                           previous, proof);
            flags |= PREVIOUS;
        }
        if (bit == TRAINER) {
            r.trainerBatch = leaf.batchHash;
            r.trainerLog = leaf.logHash;
        }
        emit LeafRevealed(runId, msg.sender, step, leaf.stateHash, leaf.batchHash, leaf.logHash);
        _revealEnd(runId, r, bit, flags, step);
    }

    /// The bottom move of a replay dispute: the caller's site hash of step j
    /// (its site leaf's preimage). The first of the two reveals also carries
    /// the run's leaf j and, for j > 0, leaf j-1 (the roots agree, so both
    /// are the run's), with their proofs against the root, leaf j's depth
    /// siblings first: the arbiter's inputs (previous state, batch, log).
    /// The second may pass anything there; its LeafRevealed event carries
    /// its site hash as the stateHash and the batch and log it passed.
    function revealSite(bytes32 runId, uint8 round, bytes32 siteHash, Leaf calldata leaf, Leaf calldata previous,
                        bytes32[] calldata proof) external {
        (Run storage r, uint8 bit, uint8 flags, uint64 step) = _revealStart(runId, round, true, leaf);
        _checkLeaf(r, bit, siteLeafHash(runId, step, siteHash));
        if (flags & PREVIOUS == 0) {
            _proveSite(runId, r, step, leaf, previous, proof);
            flags |= PREVIOUS;
        }
        emit LeafRevealed(runId, msg.sender, step, siteHash, leaf.batchHash, leaf.logHash);
        _revealEnd(runId, r, bit, flags, step);
    }

    // What every reveal checks first: the phase, round and deadline, the
    // caller's party bit (not moved yet), the kind of dispute (site: a
    // replay dispute, where the roots agree), the step-0 rule.
    function _revealStart(bytes32 runId, uint8 round, bool site, Leaf calldata leaf)
        private
        view
        returns (Run storage r, uint8 bit, uint8 flags, uint64 step)
    {
        r = _run(runId);
        _expectPhase(r, Phase.Revealing);
        if (round != r.round) revert WrongRound(r.round, round);
        if (block.timestamp > r.deadline) revert DeadlinePassed(r.deadline);
        bit = _partyBit(r, msg.sender);
        flags = r.flags;
        if (flags & bit != 0) revert AlreadyMoved(msg.sender);
        if (site != (r.kind == KIND_REPLAY && r.trainerRoot == r.auditorRoot)) revert WrongReveal();
        step = r.index;
        if (step == 0 && (leaf.batchHash != bytes32(0) || leaf.logHash != bytes32(0))) revert BadStepZero();
    }

    function _checkLeaf(Run storage r, uint8 bit, bytes32 computed) private view {
        bytes32 node = bit == TRAINER ? r.trainerNode : r.auditorNode;
        if (computed != node) revert BadLeaf(node, computed);
    }

    // Both revealed: the verdict is due.
    function _revealEnd(bytes32 runId, Run storage r, uint8 bit, uint8 flags, uint64 step) private {
        flags |= bit;
        r.flags = flags;
        if (flags & (TRAINER | AUDITOR) == TRAINER | AUDITOR) {
            uint64 deadline = uint64(block.timestamp) + _verdictWindow(r);
            r.phase = Phase.AwaitingVerdict;
            r.round = r.depth + 1;
            r.deadline = deadline;
            emit VerdictDue(runId, step, deadline);
        }
    }

    // Seconds from VerdictDue to the verdict's deadline. A committee has two
    // windows of arbiterTimeout: ballots, then reveals.
    function _verdictWindow(Run storage r) private view returns (uint64) {
        uint64 window = r.arbiterTimeout;
        return r.arbiterCount > 1 ? 2 * window : window;
    }

    /// OvtNarrow only (`narrow`): the narrowing of gameId has a move due by
    /// `until` (a round it has just started). While the game awaits its
    /// verdict and its deadline has not passed, the deadline moves to
    /// `until` plus the verdict's window (a committee's ballots then close
    /// one arbiterTimeout before it), if that is later: the arbiter keeps
    /// its whole window after the narrowing ends. `until` counts as at most
    /// now + moveTimeout, so a narrowing holds the verdict for at most its
    /// own rounds, which end by timeouts. Never earlier; a game in another
    /// phase, or past its deadline, is left as it is.
    function extendVerdict(bytes32 gameId, uint64 until) external {
        if (msg.sender != narrow) revert NotNarrow(msg.sender);
        Run storage r = runs[gameId];
        uint64 deadline = r.deadline;
        if (r.phase != Phase.AwaitingVerdict || block.timestamp > deadline) return;
        uint64 cap = uint64(block.timestamp) + r.moveTimeout;
        until = (until < cap ? until : cap) + _verdictWindow(r);
        if (until > deadline) r.deadline = until;
    }

    // A replay dispute's first reveal: the run's leaf j (its batch and log
    // are the step's) and, for j > 0, leaf j-1, against the run's root (the
    // roots agree); leaf j's depth siblings first.
    function _proveSite(bytes32 runId, Run storage r, uint64 step, Leaf calldata leaf, Leaf calldata previous,
                        bytes32[] calldata proof) private {
        uint8 depth = r.depth;
        if (proof.length != (step > 0 ? 2 * uint256(depth) : depth)) revert BadProof(r.trainerRoot, bytes32(0));
        _checkProof(runId, step, leaf, proof[:depth], depth, r.trainerRoot);
        r.trainerBatch = leaf.batchHash;
        r.trainerLog = leaf.logHash;
        if (step > 0) _provePrevious(runId, runId, r, r.trainerRoot, step, previous, proof[depth:]);
    }

    // Leaf j-1 (the first reveal of step j > 0) against root; its leaves
    // are hashed with tree (a challenge's: its run's id).
    function _provePrevious(bytes32 runId, bytes32 tree, Run storage r, bytes32 root, uint64 step,
                            Leaf calldata previous, bytes32[] calldata proof) private {
        _checkProof(tree, step - 1, previous, proof, r.depth, root);
        r.previousState = previous.stateHash;
        emit PreviousLeafRevealed(runId, step - 1, previous.stateHash, previous.batchHash, previous.logHash);
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
        if (r.arbiterCount != 1) revert CommitteeRun();
        if (_seated(committees[runId], 1) == 0) revert NotArbiter(msg.sender);
        if (block.timestamp > r.deadline) revert DeadlinePassed(r.deadline);
        if (step != r.index) revert WrongStep(r.index, step);
        _checkVerdict(r, step, outcome, outcomeCode, evidence);
        emit VerdictGiven(runId, step, outcome, evidence);
        _settle(runId, r, outcome, 1);
    }

    /// A committee member seals its verdict: ballotHash(runId, itself, step,
    /// outcome, evidence, salt), before the commit deadline (the game's
    /// deadline less arbiterTimeout). Nobody can copy a verdict it cannot read.
    function commitVerdict(bytes32 runId, bytes32 ballot) external {
        Run storage r = _run(runId);
        _expectPhase(r, Phase.AwaitingVerdict);
        uint8 n = r.arbiterCount;
        if (n == 1) revert SingleArbiterRun();
        Committee storage c = committees[runId];
        uint8 seat = _seat(r, c, msg.sender);
        uint8 bit = uint8(1) << seat;
        if (_seated(c, n) & bit == 0) revert NotArbiter(msg.sender);
        if (c.committed & bit != 0) revert AlreadyMoved(msg.sender);
        uint64 closes = r.deadline - r.arbiterTimeout;
        if (block.timestamp > closes) revert DeadlinePassed(closes);
        c.committed |= bit;
        c.ballot[seat] = ballot;
        emit VerdictCommitted(runId, msg.sender, ballot);
    }

    /// Opens a sealed ballot, once every seated arbiter has sealed one or the
    /// commit deadline has passed, and before the game's deadline. The
    /// verdict must agree with the leaves as verdict() requires. The run
    /// settles when every sealed ballot is open (or at timeout()).
    function revealVerdict(bytes32 runId, uint64 step, uint8 outcomeCode, bytes32 evidence, bytes32 salt)
        external
    {
        if (outcomeCode > uint8(type(Outcome).max)) revert BadOutcome(outcomeCode);
        Run storage r = _run(runId);
        _expectPhase(r, Phase.AwaitingVerdict);
        Committee storage c = committees[runId];
        uint8 seat = _revealable(r, c);
        if (step != r.index) revert WrongStep(r.index, step);
        bytes32 computed = ballotHash(runId, msg.sender, step, outcomeCode, evidence, salt);
        if (computed != c.ballot[seat]) revert BadBallot(c.ballot[seat], computed);
        _checkVerdict(r, step, Outcome(outcomeCode), outcomeCode, evidence);
        c.ballot[seat] = evidence;
        c.outcomes |= uint40(outcomeCode) << (8 * seat);
        uint8 revealed = c.revealed | uint8(1 << seat);
        c.revealed = revealed;
        emit VerdictRevealed(runId, msg.sender, step, Outcome(outcomeCode), evidence);
        if (revealed == c.committed) _settleCommittee(runId, r, c, r.arbiterCount);
    }

    // The caller's seat, if it may open its ballot now.
    function _revealable(Run storage r, Committee storage c) private view returns (uint8 seat) {
        seat = _seat(r, c, msg.sender);
        uint8 bit = uint8(1) << seat;
        uint8 committed = c.committed;
        if (committed & bit == 0) revert NotCommitted(msg.sender);
        if (c.revealed & bit != 0) revert AlreadyMoved(msg.sender);
        uint64 deadline = r.deadline;
        uint64 closes = deadline - r.arbiterTimeout;
        if (committed != _seated(c, r.arbiterCount) && block.timestamp <= closes) revert RevealsNotOpen(closes);
        if (block.timestamp > deadline) revert DeadlinePassed(deadline);
    }

    // The rules of docs/contract.md: the evidence must agree with what the
    // parties revealed.
    function _checkVerdict(Run storage r, uint64 step, Outcome outcome, uint8 outcomeCode, bytes32 evidence)
        private
        view
    {
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
    }

    // Settles a committee's vote: the verdict m revealed ballots agree on
    // (outcome and evidence), else NoMajority if m or more were revealed, else
    // ArbiterTimedOut. m > n/2, so at most one verdict can reach m.
    function _settleCommittee(bytes32 runId, Run storage r, Committee storage c, uint8 n) private {
        uint8 revealed = c.revealed;
        uint40 outcomes = c.outcomes;
        uint8 m = r.threshold;
        for (uint256 k = 0; k < n; k++) {
            if (revealed & (1 << k) == 0) continue;
            uint8 o = uint8(outcomes >> (8 * k));
            bytes32 e = c.ballot[k];
            uint8 matched;
            uint8 count;
            for (uint256 j = k; j < n; j++) {
                if (revealed & (1 << j) != 0 && uint8(outcomes >> (8 * j)) == o && c.ballot[j] == e) {
                    matched |= uint8(1 << j);
                    count++;
                }
            }
            if (count >= m) {
                emit VerdictGiven(runId, r.index, Outcome(o), e);
                _settle(runId, r, Outcome(o), matched);
                return;
            }
        }
        _settle(runId, r, _popcount(revealed) >= m ? Outcome.NoMajority : Outcome.ArbiterTimedOut, 0);
    }

    // ------------------------------------------------------------- timeout

    /// Ends a run whose deadline has passed; anyone may call it. In the game
    /// a party that did not move loses; if neither moved, or the arbiter did
    /// not give a verdict, both bonds are refunded. A run nobody committed to
    /// within commitTimeout of open ends Cancelled, every accepted bond back.
    function timeout(bytes32 runId) external {
        Run storage r = _run(runId);
        Phase phase = r.phase;
        uint64 deadline = r.deadline;
        if (phase == Phase.Settled || deadline == 0 || block.timestamp <= deadline) revert NotExpired(deadline);
        uint8 moved = r.flags & (TRAINER | AUDITOR);
        Outcome o;
        if (phase == Phase.Committing) {
            // Both committed: a run with proof of replay whose trainer did not reveal its site root.
            o = moved == TRAINER ? Outcome.Unchallenged
                : moved == AUDITOR ? Outcome.TrainerAbsent
                : moved != 0 ? Outcome.TrainerTimedOut : Outcome.Cancelled;
        } else if (phase == Phase.AwaitingVerdict) {
            if (r.arbiterCount > 1) {
                emit TimedOut(runId, phase, r.round, moved);
                _settleCommittee(runId, r, committees[runId], r.arbiterCount);
                return;
            }
            o = Outcome.ArbiterTimedOut;
        } else if (moved == 0) {
            o = Outcome.BothTimedOut;
        } else {
            o = moved == TRAINER ? Outcome.AuditorTimedOut : Outcome.TrainerTimedOut;
        }
        emit TimedOut(runId, phase, r.round, moved);
        _settle(runId, r, o, 0);
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

    // Credits the bonds that were paid in according to the outcome and closes
    // the run. matched: the seats whose verdict is the settled one (0 when no
    // verdict settled it).
    function _settle(bytes32 runId, Run storage r, Outcome o, uint8 matched) private {
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
        Committee storage c = committees[runId];
        uint8 n = r.arbiterCount;
        if (n > 1 || c.bond != 0) {
            (uint256 t, uint256 a) = _settleArbiters(runId, r, c, n, o, matched);
            toTrainer += t;
            toAuditor += a;
        }
        r.phase = Phase.Settled;
        r.outcome = o;
        r.deadline = 0;
        // A replay dispute (equal roots) decides the site trees, not the root.
        if ((REFUTING >> uint8(o)) & 1 != 0 && (r.kind != KIND_REPLAY || r.trainerRoot != r.auditorRoot)) {
            _refute(runId, r, o);
        }
        if (toTrainer != 0) credit[r.trainer] += toTrainer;
        if (toAuditor != 0) credit[r.auditor] += toAuditor;
        emit Settled(runId, o, toTrainer, toAuditor);
    }

    // The arbiter bonds: a seated arbiter whose verdict is not the settled
    // one loses its bond, shared equally by those whose verdict is (the
    // first of them gets the odd wei). With no settled verdict, a seated
    // arbiter that revealed nothing by the deadline loses its bond to the two
    // parties (half each, the odd wei to the auditor); a run that ends before
    // a verdict is due returns every bond. Returns the parties' shares.
    function _settleArbiters(bytes32 runId, Run storage r, Committee storage c, uint8 n, Outcome o, uint8 matched)
        private
        returns (uint256 toTrainer, uint256 toAuditor)
    {
        Payout memory p;
        p.bond = c.bond;
        p.outcome = o;
        p.matched = matched;
        p.outcomes = c.outcomes;
        uint8 seated = _seated(c, n);
        if (matched != 0) p.losers = seated & ~matched;
        else if (r.phase == Phase.AwaitingVerdict) p.losers = seated & ~c.revealed;
        uint256 forfeits = p.bond * _popcount(p.losers);
        if (matched != 0) {
            p.share = forfeits / _popcount(matched);
            p.odd = forfeits - p.share * _popcount(matched);
        } else {
            toTrainer = forfeits / 2;
            toAuditor = forfeits - toTrainer;
        }
        for (uint8 k = 0; k < n; k++) {
            if (seated & (1 << k) != 0) _payArbiter(runId, k == 0 ? r.arbiter : c.more[k - 1], k, p);
        }
    }

    struct Payout {
        uint256 bond;
        uint256 share;   // each matching arbiter's part of the forfeits
        uint256 odd;     // the remainder, to the first matching arbiter
        Outcome outcome; // the settled one
        uint8 matched;
        uint8 losers;
        uint40 outcomes; // as revealed, per seat
    }

    function _payArbiter(bytes32 runId, address who, uint8 k, Payout memory p) private {
        uint8 bit = uint8(1 << k);
        Outcome v = p.matched & bit != 0 ? p.outcome : Outcome(uint8(p.outcomes >> (8 * k)));
        uint256 lost = p.losers & bit != 0 ? p.bond : 0;
        uint256 reward;
        if (p.matched & bit != 0) {
            reward = p.share + p.odd;
            p.odd = 0;
        }
        uint256 paid = p.bond - lost + reward;
        if (paid != 0) credit[who] += paid;
        emit ArbiterSettled(runId, who, v, lost, reward);
    }

    // ------------------------------------------------------------- internal

    function _popcount(uint8 x) private pure returns (uint8 c) {
        for (; x != 0; x &= x - 1) c++;
    }

    // Who may vote: every seat when there is no arbiter bond, else those
    // that accepted.
    function _seated(Committee storage c, uint8 n) private view returns (uint8) {
        return c.bond == 0 ? uint8((1 << n) - 1) : c.accepted;
    }

    // The caller's seat on the run's committee.
    function _seat(Run storage r, Committee storage c, address who) private view returns (uint8) {
        if (who == r.arbiter) return 0;
        uint8 n = r.arbiterCount;
        for (uint8 k = 1; k < n; k++) if (c.more[k - 1] == who) return k;
        revert NotArbiter(who);
    }

    function _arbiters(Run storage r, Committee storage c) private view returns (address[5] memory a) {
        a[0] = r.arbiter;
        uint8 n = r.arbiterCount;
        for (uint256 k = 1; k < n; k++) a[k] = c.more[k - 1];
    }

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
