/* The engine worker process: `llmr engine-worker --fd N --name MODEL`, started by the
 * node (worker_client.h), one per loaded model.  It opens the engine plugin, opens
 * and maps the model, loads it into the engine, runs the requests the node sends,
 * and streams token events back; the text of each token (decoded with the model's
 * tokenizer unless the engine writes it) and stop strings are handled here, so every
 * engine gets them the same way.  It exits when the node says so or goes away. */
#ifndef LLMR_ENGINE_HOST_WORKER_MAIN_H
#define LLMR_ENGINE_HOST_WORKER_MAIN_H

#define LLMR_WORKER_COMMAND "engine-worker"

/* Serves the node on `fd` until EXIT or the end of the stream; returns the process
 * exit code. */
int llmr_engine_worker_main(int fd, const char *model_name);

/* The command line entry: argv[0] is LLMR_WORKER_COMMAND. */
int llmr_engine_worker_cli(int argc, char **argv);

#endif
