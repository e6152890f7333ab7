module jobqueue

go 1.19
