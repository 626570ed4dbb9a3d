print("training")
