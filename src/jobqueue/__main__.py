from jobqueue.cli import main

main()
