#ifndef OVT_AUDITOR_CLI_H
#define OVT_AUDITOR_CLI_H

/* `ovt audit`: replay a run and compare leaf by leaf; with chain flags,
 * commit the auditor's root, and with --agent play the game. */
int aud_cmd_audit(int argc, char **argv);

/* `ovt agent`: a party agent (trainer or auditor) for one run's game. */
int aud_cmd_agent(int argc, char **argv);

#endif
