#ifndef OVT_TRAINER_DATA_CMD_H
#define OVT_TRAINER_DATA_CMD_H

/* `ovt data mlp|text`: makes the files `ovt train --data` reads. Returns the
 * exit status (0 ok, 1 failure, 2 usage). */
int trn_cmd_data(int argc, char **argv);

#endif
